package manifests

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
)

// installDoc is where operators read how to get images.
const installDoc = "../../docs/install.md"

var (
	helmImagesRE = regexp.MustCompile("(?s)<!-- helm-images -->\n```sh\n(.*?)```")
	setImageRE   = regexp.MustCompile(`(?m)^kustomize edit set image ([^=\s]+)=(\S+)$`)
)

// docHelmInstall is the helm install command of install.md's block marked
// helm-images, continuation lines joined, as its arguments.
func docHelmInstall(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := helmImagesRE.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no block marked <!-- helm-images -->", installDoc)
	}
	args := strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " "))
	if len(args) < 4 || args[0] != "helm" || args[1] != "install" {
		t.Fatalf("the helm-images block is not a helm install command: %q", args)
	}
	return args
}

// imageValues are the chart's values that name an image: the paths of the
// maps with a repository key (exporter.image, analyzer.image).
func imageValues(prefix string, vals map[string]any, into *[]string) {
	if _, ok := vals["repository"]; ok {
		*into = append(*into, prefix)
		return
	}
	for k, v := range vals {
		if m, ok := v.(map[string]any); ok {
			imageValues(strings.TrimPrefix(prefix+"."+k, "."), m, into)
		}
	}
}

// TestDocumentedImageValues renders the chart with install.md's helm install
// command (its release, namespace and --set values) and finds the images it
// names in every pod spec: the doc sets repository and tag for each image the
// chart has, and no workload keeps a ghcr.io placeholder.
func TestDocumentedImageValues(t *testing.T) {
	args := docHelmInstall(t)
	release, namespace := args[2], "default"
	vals := map[string]any{}
	for i := 3; i < len(args); i++ {
		switch args[i] {
		case "--set":
			if err := strvals.ParseInto(args[i+1], vals); err != nil {
				t.Fatalf("--set %s: %v", args[i+1], err)
			}
			i++
		case "--namespace", "-n":
			namespace = args[i+1]
			i++
		}
	}
	defaults, err := chartutil.ReadValuesFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	imageValues("", defaults, &paths)
	sort.Strings(paths)
	if len(paths) < 2 {
		t.Fatalf("the chart's image values: %v", paths)
	}
	want := map[string]bool{}
	for _, p := range paths {
		img, _ := chartutil.Values(vals).Table(p)
		repo, _ := img["repository"].(string)
		tag, _ := img["tag"].(string)
		if repo == "" || tag == "" {
			t.Errorf("install.md's helm install sets no %s.repository and %s.tag", p, p)
			continue
		}
		want[repo+":"+tag] = true
	}
	objs := helmTemplate(t, release, namespace, vals)
	found := map[string]bool{}
	for _, o := range objs {
		for _, field := range []string{"containers", "initContainers"} {
			for _, c := range Nested[[]any](o.Fields, "spec", "template", "spec", field) {
				img, _ := c.(map[string]any)["image"].(string)
				if !want[img] {
					t.Errorf("%s %s runs %s, not an image install.md's values name", o.GVK.Kind, o.Name(), img)
				}
				found[img] = true
			}
		}
	}
	for img := range want {
		if !found[img] {
			t.Errorf("no pod spec runs %s", img)
		}
	}
}

// TestDocumentedKustomizeImages: the images install.md's `kustomize edit set
// image` lines replace are the ones the base runs.
func TestDocumentedKustomizeImages(t *testing.T) {
	doc, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	sets := setImageRE.FindAllStringSubmatch(string(doc), -1)
	if len(sets) == 0 {
		t.Fatal("install.md has no kustomize edit set image line")
	}
	base := map[string]bool{}
	for _, o := range renderDir(t, "../kubernetes/base") {
		for _, c := range Nested[[]any](o.Fields, "spec", "template", "spec", "containers") {
			img, _ := c.(map[string]any)["image"].(string)
			base[strings.SplitN(img, ":", 2)[0]] = true
		}
	}
	for _, s := range sets {
		if !base[s[1]] {
			t.Errorf("install.md replaces %s, which the base does not run (it runs %v)", s[1], base)
		}
	}
	if len(sets) != len(base) {
		t.Errorf("install.md sets %d images, the base runs %d", len(sets), len(base))
	}
}

package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
)

// Kustomization is the subset of kustomize's kustomization.yaml that gpuwatch
// uses. Any other field is an error rather than silently ignored, so the
// renderer can never disagree with kustomize about a feature it skipped.
type Kustomization struct {
	APIVersion string        `yaml:"apiVersion"`
	Kind       string        `yaml:"kind"`
	Namespace  string        `yaml:"namespace"`
	Resources  []string      `yaml:"resources"`
	Labels     []LabelSet    `yaml:"labels"`
	Images     []ImageChange `yaml:"images"`
	Patches    []Patch       `yaml:"patches"`
}

// LabelSet is one entry of `labels:`.
type LabelSet struct {
	Pairs            map[string]string `yaml:"pairs"`
	IncludeSelectors bool              `yaml:"includeSelectors"`
	IncludeTemplates bool              `yaml:"includeTemplates"`
}

// ImageChange is one entry of `images:`.
type ImageChange struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag"`
	Digest  string `yaml:"digest"`
}

// Patch is one entry of `patches:`: a strategic-merge patch from a file or
// inline, applied to the object of the same kind and name.
type Patch struct {
	Path  string `yaml:"path"`
	Patch string `yaml:"patch"`
}

// Render builds the kustomization in dir of fsys, like `kubectl kustomize dir`:
// resources (files, or folders holding a kustomization), then patches,
// namespace, labels and images, in kustomize's order.
func Render(fsys fs.FS, dir string) ([]Object, error) {
	return render(fsys, path.Clean(dir), map[string]bool{})
}

func render(fsys fs.FS, dir string, visiting map[string]bool) ([]Object, error) {
	if visiting[dir] {
		return nil, fmt.Errorf("kustomization %s: cycle through its resources", dir)
	}
	visiting[dir] = true
	defer delete(visiting, dir)

	k, err := loadKustomization(fsys, dir)
	if err != nil {
		return nil, err
	}
	var objs []Object
	seen := map[string]bool{}
	for _, r := range k.Resources {
		if strings.Contains(r, "://") || strings.HasPrefix(r, "github.com/") {
			return nil, fmt.Errorf("kustomization %s: remote resource %q is not supported", dir, r)
		}
		p := path.Join(dir, r)
		st, err := fs.Stat(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("kustomization %s: resource %s: %w", dir, r, err)
		}
		var got []Object
		if st.IsDir() {
			got, err = render(fsys, p, visiting)
		} else {
			got, err = readObjects(fsys, p)
		}
		if err != nil {
			return nil, err
		}
		for _, o := range got {
			if seen[o.ID()] {
				return nil, fmt.Errorf("kustomization %s: %s is defined twice", dir, o.ID())
			}
			seen[o.ID()] = true
			objs = append(objs, o)
		}
	}
	for i, p := range k.Patches {
		if err := applyPatch(fsys, dir, p, objs); err != nil {
			return nil, fmt.Errorf("kustomization %s: patches[%d]: %w", dir, i, err)
		}
	}
	if k.Namespace != "" {
		for i := range objs {
			setNamespace(&objs[i], k.Namespace)
		}
	}
	for _, ls := range k.Labels {
		if ls.IncludeSelectors {
			// Changing selectors of live Deployments and DaemonSets is refused
			// by the API server; we do not use it, so we do not pretend to.
			return nil, fmt.Errorf("kustomization %s: labels with includeSelectors: true are not supported", dir)
		}
		for i := range objs {
			addLabels(&objs[i], ls)
		}
	}
	for _, im := range k.Images {
		if im.Name == "" {
			return nil, fmt.Errorf("kustomization %s: images: an entry has no name", dir)
		}
		for i := range objs {
			setImages(&objs[i], im)
		}
	}
	for i := range objs {
		if err := redecode(&objs[i]); err != nil {
			return nil, fmt.Errorf("kustomization %s: %w", dir, err)
		}
	}
	return objs, nil
}

func loadKustomization(fsys fs.FS, dir string) (*Kustomization, error) {
	var data []byte
	var name string
	var err error
	for _, n := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		name = path.Join(dir, n)
		if data, err = fs.ReadFile(fsys, name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("no kustomization in %s: %w", dir, err)
	}
	var k Kustomization
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&k); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if k.Kind != "" && k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s: kind %q, want Kustomization", name, k.Kind)
	}
	return &k, nil
}

func readObjects(fsys fs.FS, p string) ([]Object, error) {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return Decode(p, data)
}

func applyPatch(fsys fs.FS, dir string, p Patch, objs []Object) error {
	var patches []Object
	var err error
	switch {
	case p.Path != "" && p.Patch != "":
		return errors.New("give path or patch, not both")
	case p.Path != "":
		patches, err = readObjects(fsys, path.Join(dir, p.Path))
	case p.Patch != "":
		patches, err = Decode("inline patch", []byte(p.Patch))
	default:
		return errors.New("neither path nor patch")
	}
	if err != nil {
		return err
	}
	for _, pt := range patches {
		matched := 0
		for i := range objs {
			o := &objs[i]
			if o.GVK.Group != pt.GVK.Group || o.GVK.Kind != pt.GVK.Kind || o.Name() != pt.Name() {
				continue
			}
			if pt.Namespace() != "" && pt.Namespace() != o.Namespace() {
				continue
			}
			if err := mergeInto(o, pt); err != nil {
				return fmt.Errorf("patch %s: %w", o.ID(), err)
			}
			matched++
		}
		if matched == 0 {
			return fmt.Errorf("patch for %s matches no resource", pt.ID())
		}
	}
	return nil
}

// mergeInto applies a strategic merge patch: with the typed object's patch
// strategy (lists of containers merge by name, and so on) for kinds the scheme
// knows, and as a JSON merge patch (maps merge, lists replace) for custom
// resources, as kustomize does for kinds it has no schema for.
func mergeInto(o *Object, patch Object) error {
	var merged map[string]any
	if o.Typed != nil {
		typed, err := scheme.Scheme.New(o.GVK)
		if err != nil {
			return err
		}
		merged, err = strategicpatch.StrategicMergeMapPatch(o.Fields, patch.Fields, typed)
		if err != nil {
			return err
		}
	} else {
		merged = mergePatch(o.Fields, patch.Fields)
	}
	o.Fields = merged
	return redecode(o)
}

// mergePatch is RFC 7386 JSON merge patch.
func mergePatch(target, patch map[string]any) map[string]any {
	out := make(map[string]any, len(target))
	for k, v := range target {
		out[k] = v
	}
	for k, pv := range patch {
		if pv == nil {
			delete(out, k)
			continue
		}
		pm, pIsMap := pv.(map[string]any)
		tm, tIsMap := out[k].(map[string]any)
		if pIsMap && tIsMap {
			out[k] = mergePatch(tm, pm)
		} else if pIsMap {
			out[k] = mergePatch(map[string]any{}, pm)
		} else {
			out[k] = pv
		}
	}
	return out
}

// clusterScoped lists the cluster-scoped kinds our manifests may contain; the
// namespace setting leaves them alone.
var clusterScoped = map[string]bool{
	"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"CustomResourceDefinition": true, "PriorityClass": true, "StorageClass": true,
	"PersistentVolume": true, "ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true,
}

func setNamespace(o *Object, ns string) {
	md := ensureMap(o.Fields, "metadata")
	switch {
	case o.GVK.Kind == "Namespace":
		md["name"] = ns
	case !clusterScoped[o.GVK.Kind]:
		md["namespace"] = ns
	}
	// kustomize's default (setRoleBindingSubjects: defaultOnly) moves only
	// subjects named "default"; others keep their namespace.
	if o.GVK.Kind == "RoleBinding" || o.GVK.Kind == "ClusterRoleBinding" {
		subjects, _ := o.Fields["subjects"].([]any)
		for _, s := range subjects {
			sm, ok := s.(map[string]any)
			if ok && sm["kind"] == "ServiceAccount" && sm["name"] == "default" {
				sm["namespace"] = ns
			}
		}
	}
}

// podTemplateKinds have a pod template at spec.template; CronJob's is deeper.
var podTemplateKinds = map[string]bool{
	"Deployment": true, "DaemonSet": true, "StatefulSet": true, "ReplicaSet": true,
	"Job": true, "ReplicationController": true,
}

func podTemplate(o *Object) map[string]any {
	spec, _ := o.Fields["spec"].(map[string]any)
	switch {
	case spec == nil:
		return nil
	case podTemplateKinds[o.GVK.Kind]:
		t, _ := spec["template"].(map[string]any)
		return t
	case o.GVK.Kind == "CronJob":
		return nested[map[string]any](spec, "jobTemplate", "spec", "template")
	}
	return nil
}

func addLabels(o *Object, ls LabelSet) {
	set := func(m map[string]any) {
		labels := ensureMap(m, "labels")
		for k, v := range ls.Pairs {
			labels[k] = v
		}
	}
	set(ensureMap(o.Fields, "metadata"))
	if ls.IncludeTemplates {
		if t := podTemplate(o); t != nil {
			set(ensureMap(t, "metadata"))
		}
	}
}

func setImages(o *Object, im ImageChange) {
	var podSpec map[string]any
	if t := podTemplate(o); t != nil {
		podSpec, _ = t["spec"].(map[string]any)
	} else if o.GVK.Kind == "Pod" {
		podSpec, _ = o.Fields["spec"].(map[string]any)
	}
	if podSpec == nil {
		return
	}
	for _, key := range []string{"initContainers", "containers"} {
		cs, _ := podSpec[key].([]any)
		for _, c := range cs {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			img, _ := cm["image"].(string)
			if name, _, _ := SplitImage(img); name == im.Name {
				cm["image"] = im.apply(img)
			}
		}
	}
}

// SplitImage splits "registry/name:tag@digest" into its name, tag and digest.
// A colon belongs to the tag only after the last slash (a registry port is
// not a tag).
func SplitImage(image string) (name, tag, digest string) {
	if i := strings.Index(image, "@"); i >= 0 {
		image, digest = image[:i], image[i+1:]
	}
	slash := strings.LastIndex(image, "/")
	if i := strings.LastIndex(image, ":"); i > slash {
		image, tag = image[:i], image[i+1:]
	}
	return image, tag, digest
}

func (im ImageChange) apply(image string) string {
	name, tag, digest := SplitImage(image)
	if im.NewName != "" {
		name = im.NewName
	}
	if im.NewTag != "" {
		tag, digest = im.NewTag, ""
	}
	if im.Digest != "" {
		tag, digest = "", im.Digest
	}
	out := name
	if tag != "" {
		out += ":" + tag
	}
	if digest != "" {
		out += "@" + digest
	}
	return out
}

func ensureMap(m map[string]any, key string) map[string]any {
	if v, ok := m[key].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[key] = v
	return v
}

// redecode rebuilds Typed from Fields after the transformers edited the
// fields, and proves the result is still a valid object of its kind.
func redecode(o *Object) error {
	enc, err := Encode([]Object{*o})
	if err != nil {
		return err
	}
	n, err := Decode(o.ID(), enc)
	if err != nil {
		return err
	}
	*o = n[0]
	return nil
}

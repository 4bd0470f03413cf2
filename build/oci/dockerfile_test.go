package oci

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// finalStage reads the directives of a Dockerfile's last stage (continued
// lines joined), keyed by instruction.
func finalStage(t *testing.T, file string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(data), " ")
	var stage map[string][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		if instr == "FROM" {
			stage = map[string][]string{}
		}
		if stage != nil {
			stage[instr] = append(stage[instr], strings.TrimSpace(rest))
		}
	}
	return stage
}

func jsonList(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return out
}

// TestDockerfilesMatchImages: the Dockerfiles build what build/oci builds:
// the same entrypoint, default arguments, user, port and label keys.
func TestDockerfilesMatchImages(t *testing.T) {
	for file, s := range map[string]Spec{
		"../exporter.Dockerfile": ExporterImage("gpuwatch-exporter", info),
		"../analyzer.Dockerfile": AnalyzerImage("gpuwatch", "../..", info),
	} {
		t.Run(file, func(t *testing.T) {
			st := finalStage(t, file)
			if !strings.HasPrefix(st["FROM"][0], "gcr.io/distroless/base-debian12") {
				t.Errorf("base %s: want a glibc distroless base", st["FROM"][0])
			}
			if got := jsonList(t, st["ENTRYPOINT"][0]); !reflect.DeepEqual(got, s.Entrypoint) {
				t.Errorf("ENTRYPOINT %q, build/oci %q", got, s.Entrypoint)
			}
			var cmd []string
			if len(st["CMD"]) > 0 {
				cmd = jsonList(t, st["CMD"][0])
			}
			if !reflect.DeepEqual(cmd, s.Cmd) {
				t.Errorf("CMD %q, build/oci %q", cmd, s.Cmd)
			}
			if st["USER"][0] != "65532:65532" {
				t.Errorf("USER %s", st["USER"][0])
			}
			if !reflect.DeepEqual([]string{st["EXPOSE"][0] + "/tcp"}, s.ExposedPorts) {
				t.Errorf("EXPOSE %v, build/oci %v", st["EXPOSE"], s.ExposedPorts)
			}
			var keys, want []string
			for _, m := range regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)=`).FindAllStringSubmatch(strings.Join(st["LABEL"], " "), -1) {
				keys = append(keys, m[1])
			}
			for k := range s.Labels {
				if k != "org.opencontainers.image.created" { // set by the engine's build time
					want = append(want, k)
				}
			}
			sort.Strings(keys)
			sort.Strings(want)
			if !reflect.DeepEqual(keys, want) {
				t.Errorf("labels %v, build/oci %v", keys, want)
			}
		})
	}
}

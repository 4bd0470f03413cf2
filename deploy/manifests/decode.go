// Package manifests reads gpuwatch's Kubernetes manifests the way the API
// server would (client-go's scheme, strict: unknown or duplicate fields are
// errors) and renders kustomizations with kustomize's library, so tests can
// check what an operator would actually apply: the kustomize overlays and the
// Helm chart alike.
package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Object is one manifest document. Typed is the client-go object for kinds
// the scheme knows (nil for custom resources such as the Prometheus
// Operator's ServiceMonitor); Fields is the document as JSON-compatible data.
type Object struct {
	GVK    schema.GroupVersionKind
	Typed  runtime.Object
	Fields map[string]any
}

// Name returns metadata.name.
func (o *Object) Name() string { return nested[string](o.Fields, "metadata", "name") }

// Namespace returns metadata.namespace ("" for cluster-scoped objects and
// objects that take the namespace from kubectl or kustomize).
func (o *Object) Namespace() string { return nested[string](o.Fields, "metadata", "namespace") }

// ID names the object for matching and messages: group/kind/namespace/name.
func (o *Object) ID() string {
	return o.GVK.Group + "/" + o.GVK.Kind + "/" + o.Namespace() + "/" + o.Name()
}

// strictCodecs decodes like the API server's strict field validation, so a
// misspelt field (hostPid, readinessprobe) fails the tests instead of being
// silently dropped on apply.
var strictCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// SplitDocuments splits a multi-document YAML stream, dropping documents that
// hold only comments or whitespace.
func SplitDocuments(data []byte) [][]byte {
	var out [][]byte
	for _, d := range docSeparator.Split(string(data), -1) {
		if hasContent(d) {
			out = append(out, []byte(d))
		}
	}
	return out
}

func hasContent(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

// Decode decodes every document of a YAML stream. name labels errors
// (usually the file name).
func Decode(name string, data []byte) ([]Object, error) {
	var out []Object
	for i, doc := range SplitDocuments(data) {
		o, err := decodeDocument(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		out = append(out, o)
	}
	return out, nil
}

func decodeDocument(doc []byte) (Object, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return Object{}, fmt.Errorf("parse yaml: %w", err)
	}
	fields := map[string]any{}
	if err := json.Unmarshal(js, &fields); err != nil {
		return Object{}, fmt.Errorf("not an object: %w", err)
	}
	typeMeta := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}{}
	_ = json.Unmarshal(js, &typeMeta)
	if typeMeta.APIVersion == "" || typeMeta.Kind == "" {
		return Object{}, fmt.Errorf("apiVersion and kind are required")
	}
	gv, err := schema.ParseGroupVersion(typeMeta.APIVersion)
	if err != nil {
		return Object{}, fmt.Errorf("apiVersion %q: %w", typeMeta.APIVersion, err)
	}
	gvk := gv.WithKind(typeMeta.Kind)
	o := Object{GVK: gvk, Fields: fields}
	if !scheme.Scheme.Recognizes(gvk) {
		return o, nil // a custom resource: callers check its fields themselves
	}
	typed, _, err := strictCodecs.UniversalDeserializer().Decode(doc, nil, nil)
	if err != nil {
		return Object{}, fmt.Errorf("decode %s: %w", gvk, err)
	}
	o.Typed = typed
	return o, nil
}

// Encode writes objects as one YAML stream.
func Encode(objs []Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		y, err := yaml.Marshal(o.Fields)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", o.ID(), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// nested reads a value at a path of map keys; the zero value when absent or
// of another type.
func nested[T any](m map[string]any, path ...string) T {
	var zero T
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return zero
		}
		cur = mm[p]
	}
	v, ok := cur.(T)
	if !ok {
		return zero
	}
	return v
}

// Nested is nested for tests and callers outside the package.
func Nested[T any](m map[string]any, path ...string) T { return nested[T](m, path...) }

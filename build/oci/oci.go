// Package oci builds gpuwatch's container images without a container
// engine: the binary, the shared libraries it links (glibc: go-nvml is a cgo
// binding that loads libnvidia-ml.so.1 from the host at run time, mounted by
// the NVIDIA container toolkit) and a few files, as one layer of an OCI
// image written to an OCI image layout with go-containerregistry. The
// Dockerfiles in build/ make the same images with a container engine.
package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user and group the images run as unless a pod or
// `docker run --user` says otherwise (distroless's "nonroot").
const NonRoot = 65532

// File is one file of the image's root file system.
type File struct {
	// Source is a file on this machine to copy; Data is used when empty.
	Source string
	Data   []byte
	Mode   int64
	UID    int
	Dir    bool
}

// Spec describes one image.
type Spec struct {
	// Binary is the program to put at /usr/bin/<its base name>, with the
	// shared libraries it needs.
	Binary     string
	Entrypoint []string
	Cmd        []string
	// Files beyond the binary, by absolute path in the image.
	Files map[string]File
	// Trees are folders of this machine copied whole when present
	// (regular files and folders; links are followed).
	Trees        []string
	Labels       map[string]string
	ExposedPorts []string
	Env          []string
	// Created stamps the image and every file (reproducible builds).
	Created  time.Time
	Platform v1.Platform
}

// Build assembles the image.
func Build(s Spec) (v1.Image, error) {
	files := map[string]File{}
	for p, f := range s.Files {
		files[p] = f
	}
	files["/usr/bin/"+filepath.Base(s.Binary)] = File{Source: s.Binary, Mode: 0o755}
	libs, err := SharedLibraries(s.Binary)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		files[l] = File{Source: l, Mode: 0o755}
	}
	for _, tree := range s.Trees {
		if err := addTree(files, tree); err != nil {
			return nil, err
		}
	}
	for p, f := range baseFiles() {
		if _, ok := files[p]; !ok {
			files[p] = f
		}
	}
	layerData, err := tarFiles(files, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "gpuwatch build/oci", Comment: "binary, shared libraries and files"}})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Variant = s.Platform.Architecture, s.Platform.OS, s.Platform.Variant
	cf.Created = v1.Time{Time: s.Created}
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.Cmd = s.Cmd
	cf.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = s.Labels
	cf.Config.Env = append([]string{"PATH=/usr/bin:/bin"}, s.Env...)
	if len(s.ExposedPorts) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.ExposedPorts {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// WriteLayout writes img into an OCI image layout at dir (created or
// added to), tagged with ref (org.opencontainers.image.ref.name).
func WriteLayout(dir, ref string, img v1.Image) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("create OCI layout: %w", err)
		}
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	return nil
}

var lddLine = regexp.MustCompile(`(?m)(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)`)

// SharedLibraries lists the shared libraries binary needs, with the dynamic
// loader, as ldd resolves them on this machine (the build machine's glibc,
// which the binary was linked against).
func SharedLibraries(binary string) ([]string, error) {
	out, err := exec.Command("ldd", binary).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", binary, err, out)
	}
	if strings.Contains(string(out), "not found") {
		return nil, fmt.Errorf("ldd %s: a library is missing:\n%s", binary, out)
	}
	var libs []string
	for _, m := range lddLine.FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	sort.Strings(libs)
	return libs, nil
}

func addTree(files map[string]File, root string) error {
	if _, err := os.Stat(root); os.IsNotExist(err) {
		return nil
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Stat(p) // follows links
		if err != nil {
			return nil // a dangling link
		}
		if st.IsDir() {
			files[p] = File{Dir: true, Mode: 0o755}
		} else if st.Mode().IsRegular() {
			files[p] = File{Source: p, Mode: 0o644}
		}
		return nil
	})
}

// baseFiles are what every image needs around a binary: the users, a
// writable /tmp, CA certificates for HTTPS and SMTP over TLS.
func baseFiles() map[string]File {
	files := map[string]File{
		"/etc/passwd":   {Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))},
		"/etc/group":    {Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot))},
		"/tmp":          {Dir: true, Mode: 0o1777},
		"/home/nonroot": {Dir: true, Mode: 0o700, UID: NonRoot},
	}
	for _, ca := range []string{"/etc/ssl/certs/ca-certificates.crt"} {
		if _, err := os.Stat(ca); err == nil {
			files[ca] = File{Source: ca, Mode: 0o644}
		}
	}
	return files
}

// tarFiles writes the files, and every parent folder, as a tar stream in
// path order with fixed times, so the same inputs give the same layer.
func tarFiles(files map[string]File, mtime time.Time) ([]byte, error) {
	all := map[string]File{}
	for p, f := range files {
		all[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = File{Dir: true, Mode: 0o755}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := all[p]
		hdr := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: f.Mode, Uid: f.UID, Gid: f.UID, ModTime: mtime, Format: tar.FormatPAX}
		if f.Dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			continue
		}
		data := f.Data
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("image file %s: %w", p, err)
			}
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

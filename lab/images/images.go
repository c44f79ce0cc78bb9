// Package images builds container images from local files into image
// archives a container runtime imports (`ctr images import`), so a
// sandbox with real nodes pulls nothing: there is no registry to pull
// from here. An image is one layer of the given files over nothing (the
// binaries are static), with its entrypoint. It uses go-containerregistry
// and writes no daemon, no Docker.
package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of an image at Path (absolute, in the image): a
// regular file with its content from Source (a path on this machine) or
// Content, a symbolic link to Link, or, with neither, an empty directory.
type File struct {
	Source  string
	Content []byte
	Link    string
	Path    string
	Mode    int64
}

// Spec describes an image.
type Spec struct {
	Ref        string   // e.g. "docker.io/netcube/netcube-agent:dev"
	Aliases    []string // more names for the same image
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string
}

// Refs are every name of the image.
func (s Spec) Refs() []string { return append([]string{s.Ref}, s.Aliases...) }

// epoch is every file's and the image's time: the same files make the
// same image, byte for byte.
var epoch = time.Unix(0, 0).UTC()

// Build makes the image of spec.
func Build(spec Spec) (v1.Image, error) {
	if len(spec.Files) == 0 {
		return nil, fmt.Errorf("image %s: no files", spec.Ref)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	files := append([]File(nil), spec.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("image %s: file %s: the path in the image must be absolute", spec.Ref, f.Path)
		}
		for d := path.Dir(f.Path); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList) // parents first
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := writeEntry(tw, f); err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.Ref, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", runtime.GOARCH, v1.Time{Time: epoch}
	cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Env = spec.Entrypoint, spec.Cmd, spec.Env
	return mutate.ConfigFile(img, cf)
}

// writeEntry writes one file, link or directory of an image.
func writeEntry(tw *tar.Writer, f File) error {
	name := strings.TrimPrefix(f.Path, "/")
	switch {
	case f.Link != "":
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: f.Link, Mode: 0o777, ModTime: epoch})
	case f.Source == "" && f.Content == nil:
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: epoch})
	}
	b := f.Content
	if f.Source != "" {
		var err error
		if b, err = os.ReadFile(f.Source); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: f.Mode, Size: int64(len(b)), ModTime: epoch}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}

// WriteArchive writes img, tagged with every one of refs, as an image
// archive (the `docker save` layout, which containerd imports).
func WriteArchive(file string, img v1.Image, refs ...string) error {
	tags := map[name.Tag]v1.Image{}
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("image name %q: %w", ref, err)
		}
		tags[tag] = img
	}
	return tarball.MultiWriteToFile(file, tags)
}

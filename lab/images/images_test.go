package images

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestAgentImageArchive: the agent image, written as an archive and read
// back as a runtime would, holds the four binaries, executable, with the
// agent as its entrypoint; the same files give the same image.
func TestAgentImageArchive(t *testing.T) {
	bin := t.TempDir()
	for _, f := range []string{"netcube-agent", "netcube-cni", "netcube-operator", "netcube"} {
		if err := os.WriteFile(filepath.Join(bin, f), []byte("\x7fELF "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, err := Build(Agent(bin))
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "agent.tar")
	if err := WriteArchive(archive, img, AgentRef); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(AgentRef)
	back, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/netcube-agent"}) || cf.OS != "linux" {
		t.Fatalf("config: entrypoint %v, os %s", cf.Config.Entrypoint, cf.OS)
	}
	layers, err := back.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d: %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.Mode
	}
	for _, f := range []string{"usr/local/bin/netcube-agent", "usr/local/bin/netcube-cni", "usr/local/bin/netcube-operator", "usr/local/bin/netcube"} {
		if got[f] != 0o755 {
			t.Errorf("%s: mode %o (present: %v)", f, got[f], got)
		}
	}
	again, _ := Build(Agent(bin))
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same files gave two images: %s, %s", d1, d2)
	}
}

func TestMissingFileIsNamed(t *testing.T) {
	_, err := Build(Agent(t.TempDir()))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

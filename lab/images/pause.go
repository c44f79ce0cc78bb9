package images

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// PauseRef is the sandbox (pod infrastructure) image's name: the runtime
// is told to use it (containerd's sandbox_image), and it is imported, not
// pulled.
const PauseRef = "registry.k8s.io/pause:3.10"

//go:embed src/pause.c
var pauseSource []byte

// Pause builds the pause binary (static C) in dir and returns its image.
func Pause(dir string) (Spec, error) {
	src := filepath.Join(dir, "pause.c")
	if err := os.WriteFile(src, pauseSource, 0o644); err != nil {
		return Spec{}, err
	}
	bin := filepath.Join(dir, "pause")
	if out, err := exec.Command("cc", "-static", "-O2", "-Wall", "-Werror", "-o", bin, src).CombinedOutput(); err != nil {
		return Spec{}, fmt.Errorf("build pause: %v\n%s", err, out)
	}
	return Spec{
		Ref:        PauseRef,
		Files:      []File{{Source: bin, Path: "/pause", Mode: 0o755}},
		Entrypoint: []string{"/pause"},
	}, nil
}

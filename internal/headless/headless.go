// Package headless renders a page in a real browser, Debian's chromium
// run headless, for the tests that check what a page shows once drawn:
// its DOM after parsing and layout, and a screenshot of it.
package headless

import (
	"context"
	"errors"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Program is the browser (hack/install-deps.sh installs it).
const Program = "chromium"

// ErrNotInstalled is told when there is no chromium on $PATH.
var ErrNotInstalled = errors.New("chromium is not installed (hack/install-deps.sh installs it)")

// Installed tells whether the browser is there.
func Installed() bool {
	_, err := exec.LookPath(Program)
	return err == nil
}

// run runs the browser headless on url with args, in a profile of its
// own (two runs at once do not share one), and gives its stdout.
func run(ctx context.Context, url string, args ...string) ([]byte, error) {
	if !Installed() {
		return nil, ErrNotInstalled
	}
	profile, err := os.MkdirTemp("", "netcube-headless-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	// --no-sandbox: the tests run as root, where chromium's sandbox
	// refuses to start.
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--user-data-dir=" + profile}, args...)
	cmd := exec.CommandContext(ctx, Program, append(all, url)...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %v: %w\n%s", Program, all, err, stderr.String())
	}
	return out, nil
}

// DOM is the page's DOM as the browser has it once loaded (--dump-dom).
func DOM(ctx context.Context, url string) (string, error) {
	out, err := run(ctx, url, "--dump-dom")
	return string(out), err
}

// Screenshot is the page drawn in a window of width × height.
func Screenshot(ctx context.Context, url string, width, height int) (image.Image, error) {
	dir, err := os.MkdirTemp("", "netcube-screenshot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "page.png")
	if _, err := run(ctx, url, "--screenshot="+file, fmt.Sprintf("--window-size=%d,%d", width, height), "--hide-scrollbars"); err != nil {
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%s wrote no screenshot: %w", Program, err)
	}
	defer f.Close()
	return png.Decode(f)
}

// Count is how many of img's pixels are of colour r, g, b (within 8 of each).
func Count(img image.Image, r, g, b uint8) int {
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr>>8, r) && near(pg>>8, g) && near(pb>>8, b) {
				n++
			}
		}
	}
	return n
}

func near(got uint32, want uint8) bool {
	d := int(got) - int(want)
	return d >= -8 && d <= 8
}

// limitedBuffer keeps the first 16 KiB written: chromium's stderr is
// chatty, and only its start says why it failed.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 16<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

var tags = regexp.MustCompile(`<[^>]*>`)

// Text is what a dumped DOM shows as text: its markup dropped, entities
// read (what a reader sees, with the SVG's labels).
func Text(dom string) string {
	return html.UnescapeString(tags.ReplaceAllString(dom, " "))
}

// Elements is how many elements of dom are <tag class="class" ...>.
func Elements(dom, tag, class string) int {
	return strings.Count(dom, "<"+tag+` class="`+class+`"`)
}

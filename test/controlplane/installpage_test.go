package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/lab/kubeenv"
	agentcfg "github.com/netcube/netcube/pkg/agent"
)

var (
	valueRow = regexp.MustCompile("(?m)^\\| `([a-zA-Z.]+)` \\| `([^`]*)` \\|")
	helmLine = regexp.MustCompile("(?m)helm (install|upgrade) ([^`\n]+)")
)

// leaves flattens a values tree into dotted keys and their YAML text.
func leaves(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, sub := range m {
			leaves(prefix+k+".", sub, out)
		}
		return
	}
	b, _ := yaml.Marshal(v)
	text := strings.TrimSpace(string(b))
	if text == `""` || text == "''" {
		text = `""`
	}
	out[strings.TrimSuffix(prefix, ".")] = text
}

// TestInstallPageRenders: docs/install.md's values table is the chart's
// values.yaml, key for key and default for default; each helm command on
// the page and the README renders the chart (helm template, the real helm) with the
// values it sets reaching the agent's configuration, which the agent
// parses.
func TestInstallPageRenders(t *testing.T) {
	page, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	chartValues := map[string]string{}
	leaves("", values, chartValues)
	pageValues := map[string]string{}
	for _, m := range valueRow.FindAllStringSubmatch(string(page), -1) {
		pageValues[m[1]] = m[2]
	}
	// Positive control: both were read.
	if chartValues["config.routing"] != "native" || pageValues["config.routing"] == "" {
		t.Fatalf("values not read: chart %q, page %q", chartValues["config.routing"], pageValues["config.routing"])
	}
	var keys []string
	for k := range chartValues {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got, ok := pageValues[k]; !ok {
			t.Errorf("docs/install.md's values table lacks %s (default %s)", k, chartValues[k])
		} else if got != chartValues[k] {
			t.Errorf("docs/install.md gives %s the default %s; values.yaml says %s", k, got, chartValues[k])
		}
	}
	for k := range pageValues {
		if _, ok := chartValues[k]; !ok {
			t.Errorf("docs/install.md's values table names %s, which values.yaml does not have", k)
		}
	}

	tools, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := helmLine.FindAllStringSubmatch(string(page), -1)
	if len(cmds) < 2 {
		t.Fatalf("docs/install.md gives %d helm commands, want the install and the upgrade", len(cmds))
	}
	fromReadme := helmLine.FindAllStringSubmatch(string(readme), -1)
	if len(fromReadme) == 0 {
		t.Fatal("the README gives no helm command")
	}
	cmds = append(cmds, fromReadme...)
	for _, m := range cmds {
		args := strings.Fields(m[2])
		var sets []string
		template := []string{"template"}
		for i := 0; i < len(args); i++ {
			switch {
			case args[i] == "--reuse-values": // upgrade's; template starts from the defaults
			case args[i] == "--set" && i+1 < len(args):
				v := strings.ReplaceAll(args[i+1], "=NEW", "=0.2.0")
				sets = append(sets, v)
				template = append(template, "--set", v)
				i++
			default:
				template = append(template, strings.ReplaceAll(args[i], "deploy/helm/netcube", chart))
			}
		}
		out, err := exec.Command(filepath.Join(tools, "helm"), template...).CombinedOutput()
		if err != nil {
			t.Errorf("helm %s %s: %v\n%s", m[1], m[2], err, out)
			continue
		}
		rendered := string(out)
		var cfg agentcfg.Config
		parsed := false
		for _, obj := range decode(t, out) {
			if c, ok := obj.(*corev1.ConfigMap); ok && c.Name == "netcube-agent" {
				parsed = true
				if err := yaml.UnmarshalStrict([]byte(c.Data["config.yaml"]), &cfg); err != nil {
					t.Errorf("helm %s: the agent's config does not parse: %v", m[1], err)
				}
			}
		}
		if !parsed {
			t.Errorf("helm %s renders no ConfigMap netcube-agent", m[1])
		}
		for _, set := range sets {
			k, v, _ := strings.Cut(set, "=")
			if !strings.Contains(rendered, v) {
				t.Errorf("helm %s %s: %s=%s is nowhere in what it renders", m[1], m[2], k, v)
			}
		}
		t.Logf("helm %s renders with %s", m[1], fmt.Sprint(sets))
	}
}

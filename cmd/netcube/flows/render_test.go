package flows

import (
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/headless"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// sample is a map of three workloads, a Service and the world: the
// client reaches the echo Service, is denied the echo pods directly by
// a NetworkPolicy, and the world is refused a Service with no endpoints.
func sample() Graph {
	client := pod("default", "client-7d4b9cf5d8-x2x9z", "client")
	echo := pod("default", "echo-0", "echo")
	denied := &flowpb.Policy{Namespace: "default", Name: "echo", Kind: "NetworkPolicy"}
	var in []*observerpb.GetFlowsResponse
	for range 5 {
		in = append(in, flow(client, echo, "10.244.1.2", "10.96.0.10", toService("default", "echo"), tcp(80)))
	}
	for range 3 {
		in = append(in, flow(client, echo, "10.244.1.2", "10.244.2.5", tcp(8080), dropped(flowpb.DropReason_POLICY_DENIED, denied)))
	}
	in = append(in, flow(&flowpb.Endpoint{}, nil, "198.18.0.1", "10.96.0.44", toService("default", "empty"), dropped(flowpb.DropReason_SERVICE_BACKEND_NOT_FOUND)))
	return Build(in, Grouping{Label: "app"})
}

var (
	nodeElem = regexp.MustCompile(`<g class="node" `)
	edgeElem = regexp.MustCompile(`<g class="edge" `)
)

func TestSVGDrawsNodesAndEdges(t *testing.T) {
	g := sample()
	if len(g.Nodes) != 5 || len(g.Edges) != 3 {
		t.Fatalf("sample: %d nodes %d edges, want 5 and 3: %+v", len(g.Nodes), len(g.Edges), g)
	}
	svg := SVG(g)
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
	}
	if n := len(nodeElem.FindAllString(svg, -1)); n != 5 {
		t.Errorf("%d nodes drawn, want 5", n)
	}
	if n := len(edgeElem.FindAllString(svg, -1)); n != 3 {
		t.Errorf("%d edges drawn, want 3", n)
	}
	for _, want := range []string{"default/client", "default/echo", "world", "5 forwarded", "3 dropped", "POLICY_DENIED ×3",
		"SERVICE_BACKEND_NOT_FOUND ×1", `data-from="workload:default/client" data-to="service:default/echo" data-forwarded="5" data-dropped="0"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG has no %q:\n%s", want, svg)
		}
	}
	// Nothing that fetches: the SVG stands alone.
	for _, bad := range []string{"<script", "href=\"http", "@import"} {
		if strings.Contains(svg, bad) {
			t.Errorf("the SVG has %q: it is not self-contained", bad)
		}
	}
	if empty := SVG(Build(nil, Grouping{Label: "app"})); !strings.Contains(empty, "no flows in this window") || nodeElem.MatchString(empty) {
		t.Errorf("the map of no flows:\n%s", empty)
	}
}

// TestLayoutPutsClientsLeftOfWhatTheyReach: a client is left of the
// Service it sends to; a back edge does not move a node without end.
func TestLayoutPutsClientsLeftOfWhatTheyReach(t *testing.T) {
	g := sample()
	g.Edges = append(g.Edges, Edge{From: "service:default/echo", To: "workload:default/client", Forwarded: 1}) // a cycle
	pos, width, height := layout(g)
	if pos["workload:default/client"].x >= pos["workload:default/echo"].x && pos["workload:default/client"].x >= pos["service:default/echo"].x {
		t.Errorf("the client at %v is not left of the echo Service %v or pods %v", pos["workload:default/client"], pos["service:default/echo"], pos["workload:default/echo"])
	}
	for id, p := range pos {
		if p.x < 0 || p.y < 0 || p.x+boxWidth > width || p.y+boxHeight > height {
			t.Errorf("%s at %v is outside the %vx%v drawing", id, p, width, height)
		}
	}
}

func TestHTMLHasTheMapAndItsEdges(t *testing.T) {
	var b strings.Builder
	if err := HTML(&b, sample(), "unix:///run/netcube/hubble.sock", 0); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<svg", `<tr class="edge dropped"><td>default/client</td><td>default/echo</td><td class="n">0</td><td class="n">3</td><td>POLICY_DENIED ×3</td><td>default/echo (NetworkPolicy)</td><td>TCP/8080</td>`,
		"9 flows, 5 nodes, 3 edges", "<td>default/client</td><td>default/echo (Service)</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "http-equiv=\"refresh\"") {
		t.Error("a page written once reloads itself")
	}
	if strings.Contains(page, "&lt;svg") {
		t.Error("the SVG is escaped into text")
	}
	b.Reset()
	_ = HTML(&b, sample(), "x", 10*time.Second) // as --serve writes it
	if !strings.Contains(b.String(), `<meta http-equiv="refresh" content="10">`) {
		t.Errorf("the served page does not reload itself:\n%s", b.String())
	}
}

// TestPageRendersInABrowser: the page as chromium draws it shows the
// workloads, the edges' counts and a drop reason, with as many nodes and
// edges as the graph has; its screenshot has the drop's red, which a map
// without drops has not (the negative after the positive).
func TestPageRendersInABrowser(t *testing.T) {
	if !headless.Installed() {
		t.Skip(headless.ErrNotInstalled)
	}
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name string, g Graph) string {
		var b strings.Builder
		if err := HTML(&b, g, "test", 0); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return "file://" + file
	}
	withDrops := write("drops.html", sample())
	dom, err := headless.DOM(ctx, withDrops)
	if err != nil {
		t.Fatal(err)
	}
	if n := headless.Elements(dom, "g", "node"); n != 5 {
		t.Errorf("the rendered SVG has %d nodes, want 5", n)
	}
	if n := headless.Elements(dom, "g", "edge"); n != 3 {
		t.Errorf("the rendered SVG has %d edges, want 3", n)
	}
	text := headless.Text(dom)
	for _, want := range []string{"default/client", "default/echo", "world", "5 forwarded", "3 dropped", "POLICY_DENIED ×3"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page shows no %q:\n%s", want, dom)
		}
	}

	img, err := headless.Screenshot(ctx, withDrops, 1400, 900)
	if err != nil {
		t.Fatal(err)
	}
	if n := headless.Count(img, 0xdc, 0x26, 0x26); n < 50 {
		t.Errorf("the screenshot of a map with drops has %d red pixels, want its dropped edges drawn red", n)
	}
	if n := headless.Count(img, 0xdb, 0xea, 0xfe); n < 1000 {
		t.Errorf("the screenshot has %d pixels of the workloads' fill: the boxes are not drawn", n)
	}
	g := sample()
	var passed []Edge
	for _, e := range g.Edges {
		if e.Dropped == 0 {
			passed = append(passed, e)
		}
	}
	g.Edges = passed
	img, err = headless.Screenshot(ctx, write("nodrops.html", g), 1400, 900)
	if err != nil {
		t.Fatal(err)
	}
	if n := headless.Count(img, 0xdc, 0x26, 0x26); n != 0 {
		t.Errorf("the screenshot of a map without drops has %d red pixels", n)
	}
}

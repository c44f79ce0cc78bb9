package flows

import (
	"fmt"
	"html"
	"sort"
	"strings"
)

// The layout's measures, in SVG user units (pixels).
const (
	boxWidth  = 220
	boxHeight = 46
	columnGap = 190
	rowGap    = 34
	margin    = 30
)

// Colours: what passed is grey, what was dropped red (the tests find the
// red in the browser's screenshot).
const (
	colourForwarded = "#6b7280"
	colourDropped   = "#dc2626"
)

var kindFill = map[string]string{KindWorkload: "#dbeafe", KindService: "#dcfce7", KindWorld: "#f3f4f6"}

type point struct{ x, y float64 }

// layout places nodes in layers, left to right: a node one layer right of
// the rightmost that sends to it (its longest path from a node nothing
// sends to), so clients are left of their Services, Services of their
// pods. A cycle's closing edge (found from the sources, as a depth-first
// walk meets it) is drawn but not laid out by; within a layer, by name.
func layout(g Graph) (map[string]point, float64, float64) {
	forward := acyclic(g)
	layer := map[string]int{}
	for range g.Nodes {
		changed := false
		for _, e := range forward {
			if layer[e.To] < layer[e.From]+1 {
				layer[e.To] = layer[e.From] + 1
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	columns := map[int][]Node{}
	maxLayer, maxRows := 0, 0
	for _, n := range g.Nodes {
		l := layer[n.ID]
		columns[l] = append(columns[l], n)
		maxLayer = max(maxLayer, l)
		maxRows = max(maxRows, len(columns[l]))
	}
	height := float64(margin*2 + maxRows*boxHeight + max(maxRows-1, 0)*rowGap)
	pos := map[string]point{}
	for l, col := range columns {
		sort.Slice(col, func(i, j int) bool { return col[i].Name < col[j].Name })
		colHeight := float64(len(col)*boxHeight + (len(col)-1)*rowGap)
		top := (height - colHeight) / 2
		for i, n := range col {
			pos[n.ID] = point{float64(margin + l*(boxWidth+columnGap)), top + float64(i*(boxHeight+rowGap))}
		}
	}
	width := float64(margin*2 + (maxLayer+1)*boxWidth + maxLayer*columnGap)
	return pos, width, height
}

// acyclic is g's edges without self-loops and those that close a cycle.
func acyclic(g Graph) []Edge {
	out := map[string][]Edge{}
	incoming := map[string]bool{}
	for _, e := range g.Edges {
		if e.From != e.To {
			out[e.From] = append(out[e.From], e)
			incoming[e.To] = true
		}
	}
	var order []string // the sources first, then the rest (a cycle of its own)
	for _, n := range g.Nodes {
		if !incoming[n.ID] {
			order = append(order, n.ID)
		}
	}
	for _, n := range g.Nodes {
		if incoming[n.ID] {
			order = append(order, n.ID)
		}
	}
	const (
		unseen = iota
		walking
		done
	)
	state := map[string]int{}
	var kept []Edge
	var walk func(id string)
	walk = func(id string) {
		state[id] = walking
		for _, e := range out[id] {
			switch state[e.To] {
			case walking: // back to a node on this path: closes a cycle
			case unseen:
				kept = append(kept, e)
				walk(e.To)
			default:
				kept = append(kept, e)
			}
		}
		state[id] = done
	}
	for _, id := range order {
		if state[id] == unseen {
			walk(id)
		}
	}
	return kept
}

// SVG draws the graph: a self-contained SVG, each node a <g class="node">
// and each edge a <g class="edge">, with data- attributes of what they are.
func SVG(g Graph) string {
	pos, width, height := layout(g)
	if len(g.Nodes) == 0 {
		width, height = 480, 80
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="flowmap" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="13">`+"\n",
		width, height, width, height)
	b.WriteString(`<defs>`)
	for id, colour := range map[string]string{"arrow-forwarded": colourForwarded, "arrow-dropped": colourDropped} {
		fmt.Fprintf(&b, `<marker id="%s" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="11" markerHeight="11" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`, id, colour)
	}
	b.WriteString("</defs>\n")
	if len(g.Nodes) == 0 {
		b.WriteString(`<text x="20" y="45" class="empty">no flows in this window</text>` + "\n")
	}
	b.WriteString(`<g class="edges">` + "\n")
	for _, e := range g.Edges {
		drawEdge(&b, e, pos[e.From], pos[e.To])
	}
	b.WriteString("</g>\n<g class=\"nodes\">\n")
	for _, n := range g.Nodes {
		drawNode(&b, n, pos[n.ID])
	}
	b.WriteString("</g>\n</svg>\n")
	return b.String()
}

func drawNode(b *strings.Builder, n Node, p point) {
	detail := n.Kind
	switch {
	case n.Kind == KindWorkload && len(n.Pods) == 1:
		detail = "1 pod"
	case n.Kind == KindWorkload:
		detail = fmt.Sprintf("%d pods", len(n.Pods))
	case n.Kind == KindService:
		detail = "Service"
	case len(n.IPs) == 1:
		detail = n.IPs[0]
	case len(n.IPs) > 1:
		detail = fmt.Sprintf("%d addresses", len(n.IPs))
	}
	title := strings.Join(append(append([]string{n.Name}, n.Pods...), n.IPs...), "\n")
	fmt.Fprintf(b, `<g class="node" data-id="%s" data-kind="%s"><title>%s</title>`, esc(n.ID), n.Kind, esc(title))
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" rx="8" fill="%s" stroke="#374151"/>`, p.x, p.y, boxWidth, boxHeight, kindFill[n.Kind])
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-weight="bold" class="name">%s</text>`, p.x+boxWidth/2, p.y+19, esc(shorten(n.Name, 30)))
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-size="11" fill="#4b5563">%s</text></g>`+"\n", p.x+boxWidth/2, p.y+36, esc(detail))
}

// drawEdge draws a curve from the right of its source to the left of its
// destination; to a node in the same layer or left of it, a loop below.
func drawEdge(b *strings.Builder, e Edge, from, to point) {
	colour, marker := colourForwarded, "arrow-forwarded"
	if e.Dropped > 0 {
		colour, marker = colourDropped, "arrow-dropped"
	}
	var path string
	var mid point
	switch {
	case to.x > from.x:
		x1, y1 := from.x+boxWidth, from.y+boxHeight/2
		x2, y2 := to.x, to.y+boxHeight/2
		c := (x2 - x1) / 2
		path = fmt.Sprintf("M%.0f,%.0f C%.0f,%.0f %.0f,%.0f %.0f,%.0f", x1, y1, x1+c, y1, x2-c, y2, x2, y2)
		mid = point{(x1 + x2) / 2, (y1 + y2) / 2}
	default:
		x1, y1 := from.x+boxWidth/2+20, from.y+boxHeight
		x2, y2 := to.x+boxWidth/2-20, to.y+boxHeight
		dip := max(y1, y2) + rowGap
		path = fmt.Sprintf("M%.0f,%.0f C%.0f,%.0f %.0f,%.0f %.0f,%.0f", x1, y1, x1, dip, x2, dip, x2, y2)
		mid = point{(x1 + x2) / 2, dip - 4}
	}
	dash := ""
	if e.Forwarded == 0 {
		dash = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(b, `<g class="edge" data-from="%s" data-to="%s" data-forwarded="%d" data-dropped="%d"><title>%s</title>`,
		esc(e.From), esc(e.To), e.Forwarded, e.Dropped, esc(edgeTitle(e)))
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="%.1f"%s marker-end="url(#%s)"/>`, path, colour, strokeWidth(e), dash, marker)
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-size="11" class="counts" paint-order="stroke" stroke="#fff" stroke-width="3">%s</text>`, mid.x, mid.y-4, esc(counts(e)))
	if e.Dropped > 0 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-size="10" fill="%s" class="reasons" paint-order="stroke" stroke="#fff" stroke-width="3">%s</text>`,
			mid.x, mid.y+9, colourDropped, esc(shorten(e.Reasons(), 44)))
	}
	b.WriteString("</g>\n")
}

// counts is an edge's label: 12 forwarded, 3 dropped.
func counts(e Edge) string {
	switch {
	case e.Dropped == 0:
		return fmt.Sprintf("%d forwarded", e.Forwarded)
	case e.Forwarded == 0:
		return fmt.Sprintf("%d dropped", e.Dropped)
	}
	return fmt.Sprintf("%d forwarded, %d dropped", e.Forwarded, e.Dropped)
}

func edgeTitle(e Edge) string {
	t := fmt.Sprintf("%s → %s: %s", e.From, e.To, counts(e))
	if len(e.Ports) > 0 {
		t += "\nports: " + strings.Join(e.Ports, " ")
	}
	if e.Dropped > 0 {
		t += "\ndropped: " + e.Reasons()
	}
	if len(e.DeniedBy) > 0 {
		t += "\ndenied by: " + strings.Join(e.DeniedBy, ", ")
	}
	return t
}

// strokeWidth grows with the edge's flows, slowly: 1.5 for one, 6 at most.
func strokeWidth(e Edge) float64 {
	w := 1.5
	for n := e.Forwarded + e.Dropped; n > 1 && w < 6; n /= 4 {
		w += 1
	}
	return w
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func esc(s string) string { return html.EscapeString(s) }

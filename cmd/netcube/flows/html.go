package flows

import (
	"html/template"
	"io"
	"strings"
	"time"
)

// page is the HTML page: the map, and its edges as a table (what a
// reader copies, and what a screen reader reads).
var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">
{{end}}<title>netcube flows map</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #111827; }
.map { overflow: auto; border: 1px solid #e5e7eb; }
table { border-collapse: collapse; margin-top: 1em; }
th, td { border: 1px solid #d1d5db; padding: 0.3em 0.6em; text-align: left; font-size: 0.9em; }
td.n { text-align: right; }
tr.dropped td { background: #fef2f2; }
.note { color: #4b5563; }
</style>
</head>
<body>
<h1>netcube flows map</h1>
<p class="note">{{.Source}}: {{.Graph.Flows}} flows, {{len .Graph.Nodes}} nodes, {{len .Graph.Edges}} edges{{if .Graph.Replies}} ({{.Graph.Replies}} replies drawn as their connection){{end}}; made {{.Made}}.{{if .Graph.Lost}} <strong>{{.Graph.Lost}} flows lost</strong> on the way: the map is short of them.{{end}}</p>
<div class="map">{{.SVG}}</div>
<table class="edges">
<thead><tr><th>From</th><th>To</th><th>Forwarded</th><th>Dropped</th><th>Drop reasons</th><th>Denied by</th><th>Ports</th></tr></thead>
<tbody>
{{range .Edges}}<tr class="edge{{if .Dropped}} dropped{{end}}"><td>{{.FromName}}</td><td>{{.ToName}}</td><td class="n">{{.Forwarded}}</td><td class="n">{{.Dropped}}</td><td>{{.Reasons}}</td><td>{{.Denied}}</td><td>{{.Ports}}</td></tr>
{{end}}</tbody>
</table>
</body>
</html>
`))

type pageEdge struct {
	FromName, ToName       string
	Forwarded, Dropped     int
	Reasons, Denied, Ports string
}

// HTML writes the self-contained page of g (no script, no fetches): with
// refresh > 0, the browser reloads it every refresh.
func HTML(w io.Writer, g Graph, source string, refresh time.Duration) error {
	names := map[string]string{}
	for _, n := range g.Nodes {
		names[n.ID] = n.Name
		if n.Kind == KindService { // a Service and its pods' workload often share a name
			names[n.ID] = n.Name + " (Service)"
		}
	}
	var edges []pageEdge
	for _, e := range g.Edges {
		edges = append(edges, pageEdge{FromName: names[e.From], ToName: names[e.To], Forwarded: e.Forwarded, Dropped: e.Dropped,
			Reasons: e.Reasons(), Denied: strings.Join(e.DeniedBy, ", "), Ports: strings.Join(e.Ports, " ")})
	}
	return page.Execute(w, map[string]any{
		"Graph": g, "Edges": edges, "Source": source, "SVG": template.HTML(SVG(g)),
		"Refresh": int(refresh.Seconds()), "Made": time.Now().UTC().Format(time.RFC3339),
	})
}

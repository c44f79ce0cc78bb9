package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Plots: one SVG per metric and family, the metric against the number of
// Services, one line per data plane (and pod->pod, dashed, where it has a
// counterpart). Plain SVG, written here: no plotting dependency.

var peerColors = map[string]string{
	"netcube": "#1b9e77", "iptables-nft": "#d95f02", "iptables-legacy": "#e7298a", "nftables": "#7570b3", "pod→pod": "#666666",
	// bench observability's modes
	modeOff: "#666666", modeDefault: "#1b9e77", modeClient: "#d95f02",
}

func plotKey(file string, fam int, independent bool) string {
	if independent {
		return file
	}
	return file + "-" + strings.ToLower(familyNames[fam])
}

type series struct {
	name   string
	ys     []float64 // per size; NaN = not measured
	dashed bool
}

func (r *CompareReport) writePlots(dir string) (map[string]string, error) {
	out := map[string]string{}
	sizes := r.sizes()
	if len(sizes) == 0 {
		return out, nil
	}
	for _, m := range cmpMetrics {
		fams := []int{0, 1}
		if m.familyIndependent() {
			fams = []int{0}
		}
		for _, fi := range fams {
			var ss []series
			if m.direct != nil {
				s := series{name: "pod→pod", dashed: true}
				for _, n := range sizes {
					s.ys = append(s.ys, nanIfNone(r.ceiling(m, n, fi)))
				}
				ss = append(ss, s)
			}
			for _, peer := range r.peers() {
				s := series{name: peer}
				for _, n := range sizes {
					p, ok := r.point(peer, n)
					if !ok {
						s.ys = append(s.ys, math.NaN())
						continue
					}
					s.ys = append(s.ys, nanIfNone(m.get(p, fi)))
				}
				ss = append(ss, s)
			}
			key := plotKey(m.file, fi, m.familyIndependent())
			title := m.title
			if !m.familyIndependent() {
				title += ", " + familyNames[fi]
			}
			if err := os.WriteFile(filepath.Join(dir, key+".svg"), []byte(svgPlot(title, "Services", sizes, ss)), 0o644); err != nil {
				return nil, err
			}
			out[key] = "plots/" + key + ".svg"
		}
	}
	return out, nil
}

func nanIfNone(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return med(xs)
}

// svgPlot draws the series against the sizes (evenly spaced: they grow by
// orders of magnitude). The y axis is logarithmic when the values span more
// than two orders of magnitude.
func svgPlot(title, xlabel string, sizes []int, ss []series) string {
	const w, h, left, right, top, bottom = 760, 400, 70, 150, 40, 50
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, y := range s.ys {
			if !math.IsNaN(y) && y > 0 {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	if math.IsInf(hi, -1) {
		lo, hi = 0, 1
	}
	logY := lo > 0 && hi/lo > 100
	ymin, ymax := 0.0, hi*1.1
	if logY {
		ymin, ymax = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	}
	py := func(y float64) float64 {
		f := (y - ymin) / (ymax - ymin)
		if logY {
			f = (math.Log10(y) - math.Log10(ymin)) / (math.Log10(ymax) - math.Log10(ymin))
		}
		return float64(h-bottom) - f*float64(h-top-bottom)
	}
	px := func(i int) float64 {
		if len(sizes) == 1 {
			return float64(left) + float64(w-left-right)/2
		}
		return float64(left) + float64(i)*float64(w-left-right)/float64(len(sizes)-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, escape(title))
	// Axes, grid and labels.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	var ticks []float64
	if logY {
		for t := ymin; t <= ymax*1.0001; t *= 10 {
			ticks = append(ticks, t)
		}
	} else {
		for i := 0; i <= 5; i++ {
			ticks = append(ticks, ymin+float64(i)*(ymax-ymin)/5)
		}
	}
	for _, t := range ticks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left, y, w-right, y, left-6, y+4, tick(t))
	}
	for i, n := range sizes {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", px(i), h-bottom+18, n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", left+(w-left-right)/2, h-12, escape(xlabel))
	// Series.
	for k, s := range ss {
		color := peerColors[s.name]
		if color == "" {
			color = "black"
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6,4"`
		}
		var pts []string
		for i, y := range s.ys {
			if math.IsNaN(y) || (logY && y <= 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(i), py(y)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(i), py(y), color)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), color, dash)
		ly := top + 10 + k*18
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n",
			w-right+10, ly, w-right+30, ly, color, dash, w-right+35, ly+4, escape(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func tick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case math.Abs(v) >= 1e3:
		return fmt.Sprintf("%gk", math.Round(v/100)/10)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

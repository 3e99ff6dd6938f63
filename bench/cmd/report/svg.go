package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Plain SVG charts, written by hand so that the report needs nothing beyond
// the standard library and renders on GitHub as an image.

// bar is one horizontal bar: a median and its confidence interval.
type bar struct {
	label    string
	value    float64
	lo, hi   float64
	color    string
	emphasis bool // drawn with a bold label (admit's headline rows)
}

// Colours by family: admit in blues, admit on the coarse clock in teal, the
// peers in warm greys, the floors in green.
const (
	colorAdmit  = "#1f5fbf"
	colorCoarse = "#2aa198"
	colorPeer   = "#b07d48"
	colorFloor  = "#4c9a2a"
)

func colorFor(family, impl string) string {
	switch {
	case family == "floor" || strings.HasPrefix(impl, "floor"):
		return colorFloor
	case strings.HasSuffix(impl, "-coarse"):
		return colorCoarse
	case family == "admit":
		return colorAdmit
	}
	return colorPeer
}

// niceStep returns a round axis step for a span.
func niceStep(span float64, ticks int) float64 {
	raw := span / float64(ticks)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

func fmtNum(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// barChart draws a horizontal bar chart of bars, with a linear axis from 0.
func barChart(title, unit, note string, bars []bar) []byte {
	const (
		labelW = 300
		plotW  = 460
		rowH   = 18
		top    = 48
		right  = 70
	)
	h := top + rowH*len(bars) + 44
	maxV := 0.0
	for _, b := range bars {
		maxV = math.Max(maxV, math.Max(b.value, b.hi))
	}
	if maxV <= 0 {
		maxV = 1
	}
	step := niceStep(maxV, 5)
	axisMax := math.Ceil(maxV/step) * step
	x := func(v float64) float64 { return labelW + v/axisMax*plotW }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", labelW+plotW+right, h)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&s, `<text x="10" y="36" fill="#555">%s</text>`+"\n", html.EscapeString(note))
	for v := 0.0; v <= axisMax+step/2; v += step {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(v), top-4, x(v), top+rowH*len(bars))
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(v), top+rowH*len(bars)+16, fmtNum(v))
	}
	fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", x(axisMax/2), top+rowH*len(bars)+34, html.EscapeString(unit))
	for i, b := range bars {
		y := top + i*rowH
		weight := "normal"
		if b.emphasis {
			weight = "bold"
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="end" font-weight="%s">%s</text>`+"\n", labelW-8, y+13, weight, html.EscapeString(b.label))
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, y+3, x(b.value)-labelW, rowH-6, b.color)
		if b.hi > b.lo {
			fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#222"/>`+"\n", x(b.lo), y+rowH/2, x(b.hi), y+rowH/2)
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" fill="#222">%s</text>`+"\n", math.Max(x(b.value), x(b.hi))+4, y+13, fmtNum(b.value))
	}
	s.WriteString("</svg>\n")
	return []byte(s.String())
}

// series is one line of a line chart.
type series struct {
	name   string
	color  string
	dashed bool
	points []point
}

type point struct{ x, y float64 }

// palette gives the lines of a chart distinct colours.
var palette = []string{"#1f5fbf", "#2aa198", "#6c71c4", "#0b2e6b", "#d33682", "#b58900", "#cb4b16", "#859900", "#7f7f7f", "#8c564b", "#17becf", "#4c9a2a"}

// lineChart draws a line chart with a log2 x axis (GOMAXPROCS) and a linear
// y axis from 0; nil when no line has a point above 0.
func lineChart(title, xunit, yunit, note string, lines []series) []byte {
	const (
		left, top    = 60, 48
		plotW, plotH = 460, 300
		legendW      = 230
	)
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, l := range lines {
		for _, p := range l.points {
			minX, maxX, maxY = math.Min(minX, p.x), math.Max(maxX, p.x), math.Max(maxY, p.y)
		}
	}
	if maxY <= 0 || minX > maxX {
		return nil
	}
	step := niceStep(maxY, 5)
	axisMax := math.Ceil(maxY/step) * step
	lx := func(v float64) float64 {
		if maxX == minX {
			return left + plotW/2
		}
		return left + (math.Log2(v)-math.Log2(minX))/(math.Log2(maxX)-math.Log2(minX))*plotW
	}
	ly := func(v float64) float64 { return top + plotH - v/axisMax*plotH }
	h := top + plotH + 50
	if lh := top + 20*len(lines) + 10; lh > h {
		h = lh
	}

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", left+plotW+legendW, h)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&s, `<text x="10" y="36" fill="#555">%s</text>`+"\n", html.EscapeString(note))
	for v := 0.0; v <= axisMax+step/2; v += step {
		fmt.Fprintf(&s, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, ly(v), left+plotW, ly(v))
		fmt.Fprintf(&s, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", left-6, ly(v)+4, fmtNum(v))
	}
	for v := minX; v <= maxX; v *= 2 {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", lx(v), top, lx(v), top+plotH)
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", lx(v), top+plotH+16, fmtNum(v))
	}
	fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", float64(left+plotW/2), top+plotH+36, html.EscapeString(xunit))
	fmt.Fprintf(&s, `<text x="14" y="%.1f" fill="#333" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`+"\n", float64(top+plotH/2), float64(top+plotH/2), html.EscapeString(yunit))
	for i, l := range lines {
		var pts []string
		for _, p := range l.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx(p.x), ly(p.y)))
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), l.color, dash)
		for _, p := range l.points {
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", lx(p.x), ly(p.y), l.color)
		}
		ly0 := top + 10 + i*20
		fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+plotW+16, ly0, left+plotW+40, ly0, l.color, dash)
		fmt.Fprintf(&s, `<text x="%d" y="%d">%s</text>`+"\n", left+plotW+46, ly0+4, html.EscapeString(l.name))
	}
	s.WriteString("</svg>\n")
	return []byte(s.String())
}

package report

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ChartKind is how a chart draws its series.
type ChartKind int

const (
	Line ChartKind = iota // one polyline with markers per series
	Bar                   // grouped bars, one group per category
)

// Chart is one panel: evenly spaced categories on x (thread counts, batch
// sizes, seconds), a linear y axis from zero, one colour per series.
type Chart struct {
	Title      string
	XLabel     string
	YLabel     string
	Kind       ChartKind
	Categories []string
	Series     []Series
}

// Series is one named line or bar colour. Values[i] belongs to
// Categories[i]; NaN leaves a gap.
type Series struct {
	Name   string
	Values []float64
}

// Figure is one SVG file: a title over charts laid out side by side.
type Figure struct {
	Title  string
	Charts []Chart
}

// Panel geometry, in SVG user units (pixels).
const (
	panelW     = 520.0
	panelH     = 360.0
	padLeft    = 72.0
	padRight   = 24.0
	padTop     = 40.0
	padBottom  = 78.0
	figTitleH  = 34.0
	fontFamily = "Helvetica, Arial, sans-serif"
)

// Palette is the series colours, in order.
var Palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// WriteSVG renders f into the file at path.
func WriteSVG(path string, f *Figure) error {
	var b strings.Builder
	if err := f.SVG(&b); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// SVG renders the chart alone as a figure without a title.
func (c Chart) SVG(w io.Writer) error { return (&Figure{Charts: []Chart{c}}).SVG(w) }

// SVG writes the figure as a standalone SVG document. The output depends only
// on the figure, so it can be compared with golden files.
func (f *Figure) SVG(w io.Writer) error {
	n := len(f.Charts)
	if n == 0 {
		n = 1
	}
	top := 0.0
	if f.Title != "" {
		top = figTitleH
	}
	width, height := panelW*float64(n), panelH+top
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="%s" font-size="12">`+"\n",
		f1(width), f1(height), f1(width), f1(height), fontFamily)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", f1(width), f1(height))
	if f.Title != "" {
		fmt.Fprintf(&b, `<text x="%s" y="22" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", f1(width/2), esc(f.Title))
	}
	for i, c := range f.Charts {
		fmt.Fprintf(&b, `<g transform="translate(%s,%s)">`+"\n", f1(panelW*float64(i)), f1(top))
		c.panel(&b)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (c Chart) panel(b *strings.Builder) {
	x0, x1 := padLeft, panelW-padRight
	y0, y1 := panelH-padBottom, padTop // y0 is the x axis (bottom)
	if c.Title != "" {
		fmt.Fprintf(b, `<text x="%s" y="24" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", f1((x0+x1)/2), esc(c.Title))
	}
	maxV := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) && v > maxV {
				maxV = v
			}
		}
	}
	ticks := niceTicks(maxV, 5)
	top := ticks[len(ticks)-1]
	ypos := func(v float64) float64 { return y0 - (v/top)*(y0-y1) }
	// Grid and y tick labels.
	for _, t := range ticks {
		y := ypos(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e0e0e0" stroke-width="1"/>`+"\n", f1(x0), f1(y), f1(x1), f1(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" fill="#333333">%s</text>`+"\n", f1(x0-6), f1(y+4), esc(tickLabel(t)))
	}
	// Axes.
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333" stroke-width="1"/>`+"\n", f1(x0), f1(y0), f1(x1), f1(y0))
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333" stroke-width="1"/>`+"\n", f1(x0), f1(y0), f1(x0), f1(y1))
	// Categories.
	nc := len(c.Categories)
	slot := (x1 - x0) / math.Max(float64(nc), 1)
	xpos := func(i int) float64 { return x0 + slot*(float64(i)+0.5) }
	every := 1
	for nc/every > 12 {
		every++
	}
	for i, cat := range c.Categories {
		if i%every != 0 {
			continue
		}
		x := xpos(i)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333" stroke-width="1"/>`+"\n", f1(x), f1(y0), f1(x), f1(y0+4))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#333333">%s</text>`+"\n", f1(x), f1(y0+18), esc(cat))
	}
	if c.XLabel != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f1((x0+x1)/2), f1(y0+36), esc(c.XLabel))
	}
	if c.YLabel != "" {
		fmt.Fprintf(b, `<text x="16" y="%s" text-anchor="middle" transform="rotate(-90 16 %s)">%s</text>`+"\n", f1((y0+y1)/2), f1((y0+y1)/2), esc(c.YLabel))
	}
	// Data.
	ns := len(c.Series)
	for si, s := range c.Series {
		col := Palette[si%len(Palette)]
		switch c.Kind {
		case Bar:
			group := slot * 0.8
			bw := group / math.Max(float64(ns), 1)
			for i, v := range s.Values {
				if i >= nc || math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				x := xpos(i) - group/2 + bw*float64(si)
				y := ypos(math.Max(v, 0))
				fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
					f1(x), f1(y), f1(bw*0.92), f1(y0-y), col, esc(s.Name), esc(c.Categories[i]), esc(Num(v)))
			}
		default:
			var pts []string
			flush := func() {
				if len(pts) > 1 {
					fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), col)
				}
				pts = pts[:0]
			}
			for i, v := range s.Values {
				if i >= nc || math.IsNaN(v) || math.IsInf(v, 0) {
					flush()
					continue
				}
				pts = append(pts, f1(xpos(i))+","+f1(ypos(v)))
			}
			flush()
			for i, v := range s.Values {
				if i >= nc || math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"><title>%s %s: %s</title></circle>`+"\n",
					f1(xpos(i)), f1(ypos(v)), col, esc(s.Name), esc(c.Categories[i]), esc(Num(v)))
			}
		}
	}
	// Legend, centred under the x label.
	if ns > 0 {
		widths := make([]float64, ns)
		total := 0.0
		for i, s := range c.Series {
			widths[i] = 18 + 7*float64(len([]rune(s.Name))) + 16
			total += widths[i]
		}
		x := (x0+x1)/2 - total/2
		y := y0 + 58
		for i, s := range c.Series {
			fmt.Fprintf(b, `<rect x="%s" y="%s" width="12" height="12" fill="%s"/>`+"\n", f1(x), f1(y-10), Palette[i%len(Palette)])
			fmt.Fprintf(b, `<text x="%s" y="%s">%s</text>`+"\n", f1(x+18), f1(y), esc(s.Name))
			x += widths[i]
		}
	}
}

// niceTicks returns about n+1 evenly spaced "round" tick values from 0 to at
// least max (1, 2, 2.5 or 5 times a power of ten apart).
func niceTicks(max float64, n int) []float64 {
	if max <= 0 || math.IsNaN(max) {
		max = 1
	}
	raw := max / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for i := 0; ; i++ {
		v := step * float64(i)
		out = append(out, v)
		if v >= max*(1-1e-9) {
			break
		}
	}
	return out
}

// tickLabel prints a tick value compactly: 250000 as 250k, 1.5e6 as 1.5M.
func tickLabel(v float64) string {
	switch {
	case v >= 1e6:
		return Num(v/1e6) + "M"
	case v >= 1e4:
		return Num(v/1e3) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func f1(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		s = "0"
	}
	return s
}

var xmlEsc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

func esc(s string) string { return xmlEsc.Replace(s) }

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress draws a progress bar on one line of a terminal, redrawn at
// most every redrawEvery; on anything but a terminal it draws nothing.
type progress struct {
	w       io.Writer
	label   string
	enabled bool
	width   int // columns of the terminal

	mu    sync.Mutex
	total int
	done  int
	drawn time.Time
}

const redrawEvery = 100 * time.Millisecond

// newProgress returns a bar for total steps (the total grows when more
// steps come than expected).
func newProgress(w io.Writer, label string, total int) *progress {
	p := &progress{w: w, label: label, total: total, width: 80}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.enabled = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			p.width = cols
		}
	}
	return p
}

// set says n steps are done in all (it never goes back).
func (p *progress) set(n int) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = max(p.done, n)
	p.total = max(p.total, p.done)
	if time.Since(p.drawn) >= redrawEvery {
		p.draw()
	}
}

// finish draws the final state and ends the line.
func (p *progress) finish() {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprintln(p.w)
}

// draw writes "\rLABEL [#####-----] 120/500  24%". The caller holds mu.
func (p *progress) draw() {
	p.drawn = time.Now()
	pct := 100
	if p.total > 0 {
		pct = p.done * 100 / p.total
	}
	count := fmt.Sprintf(" %d/%d %3d%%", p.done, p.total, pct)
	label := p.label
	barWidth := p.width - len([]rune(label)) - len(count) - 4
	if barWidth < 10 {
		label, barWidth = "", p.width-len(count)-4
	}
	filled := barWidth * pct / 100
	bar := strings.Repeat("#", filled) + strings.Repeat("-", barWidth-filled)
	fmt.Fprintf(p.w, "\r%s [%s]%s", label, bar, count)
}

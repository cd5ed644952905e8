package launch

import (
	"fmt"
	"strings"
)

// spinner shows a wait's state: on a terminal one line redrawn in place
// with a turning mark (and the detail lines printed when they change);
// piped, the lines only when they change.
type spinner struct {
	s     *Session
	last  string
	frame int
	drawn bool
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func newSpinner(s *Session) *spinner { return &spinner{s: s} }

func (sp *spinner) show(lines []string) {
	if sp.s.Out == nil || len(lines) == 0 {
		return
	}
	text := strings.Join(lines, "\n")
	changed := text != sp.last
	sp.last = text
	if !sp.s.Terminal {
		if changed {
			for _, l := range lines {
				fmt.Fprintln(sp.s.Out, l)
			}
		}
		return
	}
	if changed {
		sp.clear()
		for _, l := range lines[1:] {
			fmt.Fprintln(sp.s.Out, "  "+l)
		}
	}
	sp.frame++
	fmt.Fprintf(sp.s.Out, "\r\033[K%s %s", spinnerFrames[sp.frame%len(spinnerFrames)], lines[0])
	sp.drawn = true
}

func (sp *spinner) clear() {
	if sp.drawn {
		fmt.Fprint(sp.s.Out, "\r\033[K")
		sp.drawn = false
	}
}

func (sp *spinner) done() {
	if sp.s.Terminal && sp.s.Out != nil {
		sp.clear()
	}
}

package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kingpin/v2"
)

// WriteDoc renders every command and flag of a as Markdown (docs/cli.md; a
// test keeps the file in step with the flag definitions).
func (a *App) WriteDoc(w io.Writer) {
	m := a.Model()
	fmt.Fprintf(w, "# %s command line\n\nGenerated from the flag definitions (`UPDATE_DOCS=1 go test ./cmd/%s` rewrites it).\n\n%s\n\n", m.Name, m.Name, m.Help)
	fmt.Fprintln(w, "## Global flags")
	writeFlags(w, m.Flags)
	for _, c := range m.Commands {
		writeCommand(w, m.Name, c)
	}
}

func writeCommand(w io.Writer, program string, c *kingpin.CmdModel) {
	if c.Hidden {
		return
	}
	fmt.Fprintf(w, "\n## `%s %s`\n\n%s\n", program, c.FullCommand, c.Help)
	if len(c.Args) > 0 {
		fmt.Fprintln(w, "\n| argument | meaning |\n|---|---|")
		for _, a := range c.Args {
			fmt.Fprintf(w, "| `%s` | %s |\n", a.Name, cell(a.Help))
		}
	}
	writeFlags(w, c.Flags)
	for _, sub := range c.Commands {
		writeCommand(w, program, sub)
	}
}

func writeFlags(w io.Writer, flags []*kingpin.FlagModel) {
	var rows []string
	for _, f := range flags {
		if f.Hidden || f.Name == "help" || f.Name == "version" {
			continue
		}
		def := strings.Join(f.Default, ", ")
		if f.Envar != "" {
			def = strings.TrimSpace(def + " (env `$" + f.Envar + "`)")
		}
		rows = append(rows, fmt.Sprintf("| `--%s` | %s | %s |", f.Name, cell(def), cell(f.Help)))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\n| flag | default | meaning |\n|---|---|---|")
	fmt.Fprintln(w, strings.Join(rows, "\n"))
}

func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

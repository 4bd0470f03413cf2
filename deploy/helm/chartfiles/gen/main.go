// Command gen copies the alert rules and dashboards into the Helm chart
// (see package chartfiles).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpuwatch/gpuwatch/deploy/helm/chartfiles"
)

func main() {
	chart := flag.String("chart", "deploy/helm/gpuwatch", "the chart's directory")
	flag.Parse()
	if err := chartfiles.Write(*chart); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

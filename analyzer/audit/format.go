package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// WriteTable writes events as an aligned table for people. Every text cell
// goes through termsafe: job names, users and error details are others' text.
func WriteTable(w io.Writer, events []Event) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSTEP\tACTUATOR\tSTATE\tDRY-RUN\tATTEMPT\tHOST\tJOB\tUSER\tTEAM\tPATTERN\tTIER\tDETAIL")
	s := termsafe.String
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339),
			s(e.Step), s(e.Actuator), s(string(e.State)), e.DryRun, e.Attempt, s(e.Hostname), s(e.Job), s(e.User), s(e.Team), s(e.Pattern), s(e.Tier), s(e.Detail))
	}
	return tw.Flush()
}

// WriteJSON writes events as one JSON array.
func WriteJSON(w io.Writer, events []Event) error {
	if events == nil {
		events = []Event{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(events)
}

package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable writes events as an aligned table for people.
func WriteTable(w io.Writer, events []Event) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSTEP\tACTUATOR\tSTATE\tDRY-RUN\tATTEMPT\tHOST\tJOB\tUSER\tTEAM\tPATTERN\tTIER\tDETAIL")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339),
			e.Step, e.Actuator, e.State, e.DryRun, e.Attempt, e.Hostname, e.Job, e.User, e.Team, e.Pattern, e.Tier, e.Detail)
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

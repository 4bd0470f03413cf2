package dashboards

import (
	"encoding/json"
	"fmt"
)

// Query is one PromQL target of one panel of a generated dashboard.
type Query struct {
	Dashboard string // dashboard uid
	Panel     string // panel title
	PanelType string // timeseries, stat, table, state-timeline
	RefID     string
	Expr      string
	Legend    string
	Instant   bool
}

// Variable is one template variable of a generated dashboard.
type Variable struct {
	Name, Type, Query, Regex string
	Sort                     int
	Multi, IncludeAll        bool
	AllValue                 string
}

// jsonDashboard is the part of a dashboard's JSON the walkers read.
type jsonDashboard struct {
	UID    string      `json:"uid"`
	Panels []jsonPanel `json:"panels"`
	Templ  struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Regex      string `json:"regex"`
			Sort       int    `json:"sort"`
			Multi      bool   `json:"multi"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
}

type jsonPanel struct {
	ID        int         `json:"id"`
	Type      string      `json:"type"`
	Title     string      `json:"title"`
	Collapsed bool        `json:"collapsed"`
	Panels    []jsonPanel `json:"panels"`
	Targets   []struct {
		RefID   string `json:"refId"`
		Expr    string `json:"expr"`
		Legend  string `json:"legendFormat"`
		Instant bool   `json:"instant"`
	} `json:"targets"`
	Options struct {
		ReduceOptions *struct {
			Calcs []string `json:"calcs"`
		} `json:"reduceOptions"`
		Tooltip *struct {
			Mode string `json:"mode"`
		} `json:"tooltip"`
	} `json:"options"`
}

func parse(data []byte) (*jsonDashboard, error) {
	var d jsonDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("parse dashboard JSON: %w", err)
	}
	return &d, nil
}

// Queries lists every target of every panel of a dashboard's JSON, those of
// collapsed rows included.
func Queries(data []byte) ([]Query, error) {
	d, err := parse(data)
	if err != nil {
		return nil, err
	}
	var out []Query
	var walk func(ps []jsonPanel)
	walk = func(ps []jsonPanel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, t := range p.Targets {
				out = append(out, Query{Dashboard: d.UID, Panel: p.Title, PanelType: p.Type,
					RefID: t.RefID, Expr: t.Expr, Legend: t.Legend, Instant: t.Instant})
			}
		}
	}
	walk(d.Panels)
	return out, nil
}

// Variables lists a dashboard's template variables in order.
func Variables(data []byte) ([]Variable, error) {
	d, err := parse(data)
	if err != nil {
		return nil, err
	}
	var out []Variable
	for _, v := range d.Templ.List {
		q, _ := v.Query.(string)
		out = append(out, Variable{Name: v.Name, Type: v.Type, Query: q, Regex: v.Regex, Sort: v.Sort, Multi: v.Multi, IncludeAll: v.IncludeAll, AllValue: v.AllValue})
	}
	return out, nil
}

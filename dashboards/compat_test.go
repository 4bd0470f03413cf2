package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// grafana104 is the part of Grafana 10.4's dashboard schema
// (kinds/dashboard/dashboard_kind.cue and the variable model of
// @grafana/data at v10.4) that the generated JSON must keep to: the fields
// each object may carry, and the values that came only later.
var grafana104 = struct {
	schemaVersion             int
	dashboard, link, variable map[string]bool
	panel                     map[string]bool
	variableSorts             map[int]bool
}{
	schemaVersion: 39,
	dashboard: set("id", "uid", "title", "description", "revision", "gnetId", "tags", "style", "timezone",
		"editable", "graphTooltip", "time", "timepicker", "fiscalYearStartMonth", "liveNow", "weekStart",
		"refresh", "schemaVersion", "version", "panels", "templating", "annotations", "links", "snapshot"),
	// A closed struct in 10.4: no placement (Grafana 12).
	link: set("title", "type", "icon", "tooltip", "url", "tags", "asDropdown", "targetBlank", "includeVars", "keepTime"),
	// The query, datasource and custom variable fields of 10.4; no
	// allowCustomValue (Grafana 11).
	variable: set("id", "type", "name", "label", "rootStateKey", "global", "hide", "skipUrlSync", "index",
		"state", "error", "description", "query", "datasource", "current", "options", "multi", "includeAll",
		"allValue", "refresh", "regex", "sort", "definition", "auto", "auto_min", "auto_count", "pluginId"),
	panel: set("type", "id", "pluginVersion", "tags", "targets", "title", "description", "transparent",
		"datasource", "gridPos", "links", "repeat", "repeatDirection", "maxPerRow", "interval", "timeFrom",
		"timeShift", "hideTimeOverride", "libraryPanel", "transformations", "options", "fieldConfig",
		"collapsed", "panels", "cacheTimeout", "queryCachingTTL"),
	// 0-6: disabled, alphabetical, numerical and case-insensitive, each
	// ascending and descending; natural sort (7, 8) came in Grafana 11.
	variableSorts: map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true},
}

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// extra lists the keys of obj that allowed lacks.
func extra(obj map[string]json.RawMessage, allowed map[string]bool) []string {
	var out []string
	for k := range obj {
		if !allowed[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestGrafanaCompatibility checks every generated dashboard against the
// schema of the oldest supported Grafana (OldestGrafana).
func TestGrafanaCompatibility(t *testing.T) {
	if OldestGrafana != "10.4" || SchemaVersion != grafana104.schemaVersion {
		t.Fatalf("supported from Grafana %s with schema %d, but this test holds Grafana 10.4's schema (%d)",
			OldestGrafana, SchemaVersion, grafana104.schemaVersion)
	}
	for name, data := range rendered(t) {
		var d map[string]json.RawMessage
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		var version int
		if err := json.Unmarshal(d["schemaVersion"], &version); err != nil || version != grafana104.schemaVersion {
			t.Errorf("%s: schemaVersion %s, want %d", name, d["schemaVersion"], grafana104.schemaVersion)
		}
		if x := extra(d, grafana104.dashboard); len(x) > 0 {
			t.Errorf("%s: dashboard fields Grafana 10.4 does not know: %v", name, x)
		}
		var links []map[string]json.RawMessage
		if err := json.Unmarshal(d["links"], &links); err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if x := extra(l, grafana104.link); len(x) > 0 {
				t.Errorf("%s: link fields Grafana 10.4 does not know: %v", name, x)
			}
		}
		var templating struct {
			List []map[string]json.RawMessage `json:"list"`
		}
		if err := json.Unmarshal(d["templating"], &templating); err != nil {
			t.Fatal(err)
		}
		for _, v := range templating.List {
			if x := extra(v, grafana104.variable); len(x) > 0 {
				t.Errorf("%s: variable %s fields Grafana 10.4 does not know: %v", name, v["name"], x)
			}
			var s int
			if raw, ok := v["sort"]; ok && (json.Unmarshal(raw, &s) != nil || !grafana104.variableSorts[s]) {
				t.Errorf("%s: variable %s sort %s is not one of Grafana 10.4's", name, v["name"], raw)
			}
		}
		var panels []map[string]json.RawMessage
		if err := json.Unmarshal(d["panels"], &panels); err != nil {
			t.Fatal(err)
		}
		for _, p := range panels {
			if x := extra(p, grafana104.panel); len(x) > 0 {
				t.Errorf("%s: panel %s fields Grafana 10.4 does not know: %v", name, p["title"], x)
			}
		}
	}
}

// TestCompatibleStripsNewerOptions: what the SDK writes for newer Grafana
// versions is gone after compatible, so the check above has teeth.
func TestCompatibleStripsNewerOptions(t *testing.T) {
	d, err := newDashboard("x", "x", "x", false).Build()
	if err != nil {
		t.Fatal(err)
	}
	if d.SchemaVersion == SchemaVersion || d.Links[0].Placement == nil || d.Templating.List[1].AllowCustomValue == nil {
		t.Fatalf("the SDK no longer writes newer options (schema %d); this test and compatible can go", d.SchemaVersion)
	}
	compatible(&d)
	if d.SchemaVersion != SchemaVersion || d.Links[0].Placement != nil || d.Templating.List[1].AllowCustomValue != nil {
		t.Errorf("compatible left newer options: schema %d, placement %v, allowCustomValue %v",
			d.SchemaVersion, d.Links[0].Placement, d.Templating.List[1].AllowCustomValue)
	}
}

// TestREADMEStatesSupportedVersions: the README promises what this package
// generates for.
func TestREADMEStatesSupportedVersions(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Grafana %s onwards", OldestGrafana)
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q", want)
	}
	if !strings.Contains(string(readme), fmt.Sprintf("schema %d", SchemaVersion)) {
		t.Errorf("README.md does not name JSON schema %d", SchemaVersion)
	}
}

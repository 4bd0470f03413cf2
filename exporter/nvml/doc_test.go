package nvml

import (
	"os"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/schema"
)

// docRow is one row of doc.go's table of NVML calls.
type docRow struct {
	call    string
	metrics []string
	note    string
}

func names(ms ...*schema.Metric) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// docRows is the table of calls: the plain reads from the reads table, the
// others from the tables and code that make them.
func docRows() []docRow {
	rows := []docRow{{"GetMemoryInfo_v2 (else GetMemoryInfo)", names(schema.FBUsed, schema.FBFree, schema.FBReserved),
		"bytes / 2^20, MiB; reserved from v2 only"}}
	for _, rd := range reads {
		rows = append(rows, docRow{rd.call, names(rd.metrics...), rd.note})
	}
	reasons := make([]string, len(schema.ClockEventReasons))
	for i, r := range schema.ClockEventReasons {
		reasons[i] = r.Name
	}
	var nvlink []string
	for _, c := range nvlinkCounters {
		nvlink = append(nvlink, c.m.Name)
	}
	var gpm []string
	for _, g := range gpmMetrics {
		gpm = append(gpm, g.m.Name)
	}
	return append(rows,
		docRow{"GetFieldValues(FI_DEV_MEMORY_TEMP)", names(schema.MemoryTemp), "C"},
		docRow{"GetCurrentClocksEventReasons (else GetCurrentClocksThrottleReasons)", names(schema.ClockEvents, schema.ClockEventActive),
			"the bitmask, and 0/1 per reason: " + strings.Join(reasons, ", ")},
		docRow{"GetNvLinkErrorCounter(link, DL_CRC_FLIT, DL_CRC_DATA, DL_REPLAY, DL_RECOVERY)", nvlink, "sum over enabled links"},
		docRow{"GetFieldValues(FI_DEV_NVLINK_THROUGHPUT_DATA_TX/_RX, scope = link)", names(schema.NVLinkBW), "KiB of data, TX + RX, sum over links"},
		docRow{"GetComputeRunningProcesses, GetGraphicsRunningProcesses", names(schema.ProcessMemory),
			"bytes, with pid and type; on a MIG GPU the process belongs to its GPU instance; attribution adds the rest"},
		docRow{"GetProcessUtilization(last sample's timestamp)", names(schema.HolderUseMetrics...),
			"each process's samples since the last cycle averaged, percent / 100, summed per holder once attribution " +
				"named the processes' jobs; ERROR_NOT_FOUND is every process idle; never called on a GPU in MIG mode, where NVML cannot"},
		docRow{"EventSetWait (XID critical error events)", names(schema.XIDLast, schema.XIDErrors), "last XID, 0 before any; count per XID"},
		docRow{"GPM: GpmSampleGet / GpmMigSampleGet, GpmMetricsGet over the previous and the current sample", gpm,
			"utilisations: percent / 100, ratio 0-1; PCIe and NVLink: MiB/s x 2^20, bytes/s"},
		docRow{"(every collection)", names(schema.GPUUp, schema.Capabilities), `capabilities: source="nvml", "gpm", and "process_utilization" for a cycle that read every process's own use`},
	)
}

// wrap lays words out in lines of at most width bytes after prefix.
func wrap(prefix, text string, width int) string {
	var b strings.Builder
	line := prefix
	for _, w := range strings.Fields(text) {
		if len(line) > len(prefix) && len(line)+1+len(w) > width {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = prefix
		}
		if len(line) > len(prefix) {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}

func renderDocTable() string {
	var b strings.Builder
	b.WriteString("// Generated from the reads table in reads.go and the code of the other\n// calls (UPDATE_DOCS=1 go test ./exporter/nvml rewrites it).\n//\n")
	for _, r := range docRows() {
		b.WriteString(wrap("//\t", r.call, 100))
		b.WriteString(wrap("//\t    ", strings.Join(r.metrics, ", ")+" ("+r.note+")", 100))
	}
	return b.String()
}

// TestDocTable keeps doc.go's table of calls in step with the code.
func TestDocTable(t *testing.T) {
	const path = "doc.go"
	const start, end = "// # Which NVML call feeds which metric\n//\n", "//\n// On a MIG GPU"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, start), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: table markers not found", path)
	}
	want := renderDocTable()
	if s[i+len(start):j] == want {
		return
	}
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(s[:i+len(start)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the table of NVML calls is out of date; run UPDATE_DOCS=1 go test ./exporter/nvml", path)
}

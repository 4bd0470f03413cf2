package sim

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// scenarioFile is the scenario file's shape. Every field has a type that
// refuses a bad value as it is decoded (internal/configfile's field types
// and the ones below); the validator keeps the rules that join keys: a
// workload's node, GPUs and behaviour parameters, overlaps, fault windows.
// A pointer field is one whose absence means something (a default that
// depends on another key, or "not both").
type scenarioFile struct {
	Name        string           `yaml:"name"`
	Description string           `yaml:"description"`
	Origin      *configfile.Time `yaml:"origin"`
	Repeat      span             `yaml:"repeat"`
	Noise       noiseFile        `yaml:"noise"`
	Fleet       []nodeGroupFile  `yaml:"fleet"`
	Workloads   []workloadFile   `yaml:"workloads"`
	Faults      []faultFile      `yaml:"faults"`
}

type noiseFile struct {
	IdleUtilPercent float64 `yaml:"idle_util_percent"`
	PowerJitterW    float64 `yaml:"power_jitter_w"`
	BoardIdleSpread float64 `yaml:"board_idle_spread"`
}

type nodeGroupFile struct {
	Hostname  string       `yaml:"hostname"`
	Hostnames []string     `yaml:"hostnames"`
	Model     modelName    `yaml:"model"`
	GPUs      int          `yaml:"gpus"`
	MIG       []migGPUFile `yaml:"mig"`
}

type migGPUFile struct {
	GPU      int          `yaml:"gpu"`
	Profiles []migProfile `yaml:"profiles"`
}

type migRefFile struct {
	GPU      int `yaml:"gpu"`
	Instance int `yaml:"instance"`
}

// paramsFile's fields are pointers: a parameter left out takes its
// behaviour's default, and one the behaviour does not read is an error.
type paramsFile struct {
	Util       *configfile.Percent `yaml:"util"`
	MemoryGiB  *float64            `yaml:"memory_gib"`
	Active     *span               `yaml:"active"`
	Delay      *span               `yaml:"delay"`
	StallEvery *span               `yaml:"stall_every"`
	Stall      *span               `yaml:"stall"`
	Period     *span               `yaml:"period"`
	Phase      *configfile.Delay   `yaml:"phase"`
	MinUtil    *configfile.Percent `yaml:"min_util"`
	MaxUtil    *configfile.Percent `yaml:"max_util"`
	IdleGPUs   *int                `yaml:"idle_gpus"`
	OrphanFor  *span               `yaml:"orphan_for"`
	CPUCores   *float64            `yaml:"cpu_cores"`
	Every      *span               `yaml:"every"`
	Burst      *span               `yaml:"burst"`
	Quiet      *span               `yaml:"quiet"`
}

type workloadFile struct {
	ID        string            `yaml:"id"`
	Scheduler scheduler         `yaml:"scheduler"`
	Namespace string            `yaml:"namespace"`
	Container string            `yaml:"container"`
	User      string            `yaml:"user"`
	Account   string            `yaml:"account"`
	Team      string            `yaml:"team"`
	Kind      kind              `yaml:"kind"`
	JobName   string            `yaml:"job_name"`
	Command   string            `yaml:"command"`
	Node      string            `yaml:"node"`
	GPUs      []int             `yaml:"gpus"`
	MIG       *migRefFile       `yaml:"mig"`
	Start     offset            `yaml:"start"`
	End       *offset           `yaml:"end"`
	Duration  *span             `yaml:"duration"`
	Behaviour Behaviour         `yaml:"behaviour"`
	Params    paramsFile        `yaml:"params"`
	Labels    map[string]string `yaml:"labels"`
	Shared    bool              `yaml:"shared"`
	Expect    []wastePattern    `yaml:"expect"`
}

type faultFile struct {
	Kind     FaultKind `yaml:"kind"`
	Node     string    `yaml:"node"`
	GPUs     []int     `yaml:"gpus"`
	At       offset    `yaml:"at"`
	Duration *span     `yaml:"duration"`
	Every    span      `yaml:"every"`
	Until    *offset   `yaml:"until"`
	XID      int       `yaml:"xid"`
	Count    int       `yaml:"count"`
	Field    string    `yaml:"field"`
}

// UnmarshalYAML accepts the behaviours doc.go describes.
func (b *Behaviour) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, b, "behaviour", behaviours...)
}

// UnmarshalYAML accepts the fault kinds the simulator injects.
func (k *FaultKind) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, k, "fault kind", faultKinds...)
}

// scheduler is which scheduler's identity a workload carries.
type scheduler string

// UnmarshalYAML accepts slurm and kubernetes.
func (s *scheduler) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, s, "scheduler", schema.SchedulerSlurm, schema.SchedulerKubernetes)
}

// kind is a workload's kind as findings report it.
type kind string

// UnmarshalYAML accepts batch, interactive and service.
func (k *kind) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, k, "kind", schema.KindBatch, schema.KindInteractive, schema.KindService)
}

// wastePattern is a pattern a workload is expected to be found with.
type wastePattern string

// UnmarshalYAML accepts the waste patterns (schema.Patterns).
func (w *wastePattern) UnmarshalYAML(n *yaml.Node) error {
	var p schema.Pattern
	if err := configfile.OneOf(n, &p, "pattern", schema.Patterns...); err != nil {
		return err
	}
	*w = wastePattern(p)
	return nil
}

// modelName is a GPU model the simulator knows, by key or NVML name.
type modelName string

// UnmarshalYAML accepts what LookupModel finds.
func (m *modelName) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	if _, ok := LookupModel(v); !ok {
		return configfile.FieldError(n, "unknown model %q (known: %s)", v, strings.Join(ModelKeys(), ", "))
	}
	*m = modelName(v)
	return nil
}

// migProfile is a MIG profile name such as "3g.40gb".
type migProfile string

// UnmarshalYAML accepts 1 to 7 compute slices and up to 200 GB.
func (p *migProfile) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	if _, err := migProfileGiB(v); err != nil {
		return configfile.FieldError(n, "%v", err)
	}
	*p = migProfile(v)
	return nil
}

// migProfileGiB reads the memory size of a MIG profile such as "3g.40gb".
func migProfileGiB(p string) (float64, error) {
	var g int
	var gb float64
	if _, err := fmt.Sscanf(p, "%dg.%fgb", &g, &gb); err != nil || g < 1 || g > 7 || gb <= 0 || gb > 200 {
		return 0, fmt.Errorf("invalid MIG profile %q (e.g. 1g.10gb, 3g.40gb)", p)
	}
	return gb, nil
}

// offset is a time relative to the scenario's origin, in gpuwatch's one
// duration syntax with an optional sign ("-2h" starts before the origin),
// within 10 years of it.
type offset time.Duration

// UnmarshalYAML reads a signed duration (parseDuration).
func (o *offset) UnmarshalYAML(n *yaml.Node) error {
	d, err := offsetAt(n)
	if err != nil {
		return err
	}
	*o = offset(d)
	return nil
}

// span is a positive length of time of at most 10 years.
type span time.Duration

// UnmarshalYAML refuses zero and negatives.
func (s *span) UnmarshalYAML(n *yaml.Node) error {
	d, err := offsetAt(n)
	if err != nil {
		return err
	}
	if d <= 0 {
		return configfile.FieldError(n, "must be positive, got %s", n.Value)
	}
	*s = span(d)
	return nil
}

func offsetAt(n *yaml.Node) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, configfile.FieldError(n, "want a duration such as 90s, 1h or -2h")
	}
	d, err := parseDuration(n.Value)
	if err != nil {
		return 0, configfile.FieldError(n, "%v", err)
	}
	return d, nil
}

// parseDuration parses an offset in gpuwatch's one duration syntax
// (configfile.ParseDuration: 90s, 15m, 1h30m, 3d, 2w) with an optional
// sign ("-2h" starts before the origin).
func parseDuration(s string) (time.Duration, error) {
	body := strings.TrimSpace(s)
	neg := strings.HasPrefix(body, "-")
	body = strings.TrimPrefix(strings.TrimPrefix(body, "-"), "+")
	d, err := configfile.ParseDuration(body)
	if err != nil || body == "" {
		return 0, fmt.Errorf("duration %q: want e.g. 90s, 15m, 1h30m, 3d or 2w, with an optional sign", s)
	}
	if d > maxOffset {
		return 0, fmt.Errorf("duration %q: more than 10 years", s)
	}
	if neg {
		d = -d
	}
	return d, nil
}

// maxOffset bounds offsets so arithmetic on them never overflows.
const maxOffset = 10 * 365 * 24 * time.Hour

// Package sim is the simulated fleet: a telemetry source that produces, for
// nodes × GPUs of named models, everything the NVML source publishes plus
// DCGM's profiling fields, driven by a scenario file of workloads and faults
// over time. The demo, the exporter's --source=sim, the alert-rule tests and
// the analyzer's labelled corpus all run on it.
//
// # Determinism and time
//
// Every gauge is a function of (seed, scenario, device, instant): noise is a
// hash of those keys, not a random stream, so a snapshot at time t does not
// depend on which instants were collected before. Counters are monotonic:
// fault counters (XID, ECC, remaps, PCIe, NVLink errors) and violation times
// are analytic functions of t; energy and NVLink traffic integrate power and
// bandwidth between collections; job CPU seconds are analytic in the job's
// age. Time comes from Options.Clock, so a test or the demo fast-forwards a
// fake clock through a simulated week (about 3 s for 32 GPUs at 30 s steps).
// Offsets in the scenario count from the origin: the file's `origin`, or
// Options.Origin, or the clock's time at New.
//
// Collect reports the node named by Options.Node (the first node by
// default); CollectAll reports every node at one clock reading.
//
// # Scenario file (YAML, strict: unknown keys are errors; errors name file:line and key)
//
//	name: corpus                  # default: the file name
//	description: free text
//	origin: 2026-11-02T00:00:00Z  # optional fixed start (RFC 3339)
//	repeat: 72h                   # optional: replay the workloads every 72h (job ids get -r<N>)
//	noise:                        # optional: what real boards add to idle readings (default none)
//	  idle_util_percent: 2         # an idle GPU reads a whole 0..N % util per sample (0-10)
//	  power_jitter_w: 4            # ± watts on every power reading (0-50; at least 1.2)
//	  board_idle_spread: 0.1       # each board's idle draw: the model's × (1 ± up to this), 0-0.5
//	fleet:                        # one or more node groups
//	  - hostnames: [a100-01, a100-02]   # or hostname: a100-01
//	    model: A100-SXM4-80GB      # A100-SXM4-80GB, H100-SXM5-80GB, H200, L40S, L4
//	    gpus: 8                    # 1-16, default 8
//	    mig: [{gpu: 7, profiles: [3g.40gb, 3g.40gb]}]   # optional MIG GPUs (GI ids 1..n)
//	workloads:                    # allocations: a job holding GPUs of one node over a time span
//	  - id: "4101"                 # hpc_job id (slurm) or pod name (kubernetes); required
//	    scheduler: slurm           # slurm (default) or kubernetes
//	    namespace: ml              # kubernetes only, default "default"
//	    container: trainer         # kubernetes only, default "main"
//	    user: alice                # required
//	    account: vision            # default: team
//	    team: vision               # default: account
//	    kind: batch                # batch | interactive | service; default by behaviour
//	    job_name: resnet           # default: the behaviour
//	    command: python train.py   # process command line; default by behaviour
//	    node: a100-01              # required, a fleet hostname
//	    gpus: [0, 1]               # GPU indexes, or:
//	    mig: {gpu: 7, instance: 1} # one MIG instance
//	    start: 2h                  # offset from the origin (may be negative), default 0
//	    end: 30h                   # or duration: 28h (one of them is required)
//	    behaviour: training        # see below
//	    params: {util: 95}         # behaviour parameters, see below
//	    labels: {app: x}           # pod labels/annotations (for policy exemptions)
//	    expect: [stuck]            # ground truth: patterns an analyzer must find ([] = healthy)
//	faults:
//	  - kind: xid                  # see below
//	    node: a100-01
//	    gpus: [2]                  # default: every GPU of the node
//	    at: 90s                    # first occurrence, default 0
//	    every: 2m                  # recurrence, default once
//	    until: 6h                  # last possible occurrence, default none
//	    duration: 10m              # window kinds: how long each occurrence lasts (0 = for good)
//	    xid: 79                    # kind xid: the code
//	    count: 1                   # errors per occurrence, default 1
//	    field: power_usage         # kind field_error: the field that fails
//
// Durations use gpuwatch's one syntax, whole units largest first: 90s, 15m,
// 1h30m, 1d12h, 2w; offsets may carry a sign ("-2h": before the origin).
//
// # Behaviours and their parameters (defaults in parentheses)
//
//   - training: busy, util ≈ util (95) %, memory_gib (48) per GPU, NVLink traffic when multi-GPU.
//   - bursty_training: training (util 88) with data-loader stalls: one stall of `stall` (40s)
//     per `stall_every` (5m) at a seeded position, util 0 with memory held.
//   - inference_daily: kind service; util follows a daily cosine between min_util (12) and
//     max_util (75) over `period` (24h), trough at the origin's time of day plus `phase` (0);
//     memory_gib 30; `quiet` (0) is a span around each trough with no request at all (util 0,
//     memory held), as an inference service sees overnight.
//   - cpu_only: holds the GPUs with no process: util 0, FB ≈ 0, idle power; burns cpu_cores (12).
//   - hung_collective: training for `active` (90m), then util ≈ 100 % at near-idle power with
//     SM and DRAM activity ≈ 0 (a spin-waiting collective).
//   - nccl_hang: training for `active` (90m), then a collective that never completes as the
//     field reads it: one block per NCCL channel resident and spinning, so util ≈ 100 %, SM
//     activity 0.12-0.24 (fixed per job), tensor and DRAM activity ≈ 0, flat power a little
//     over idle, memory held.
//   - small_batch_inference: the hang's look-alike: util ≈ util (96) %, SM activity in the
//     same low tenths, but DRAM and tensor activity and memory-copy util clearly above 0 and
//     power swinging with the request rate; memory_gib 20, batch kind.
//   - stuck_idle: training for `active` (60m), then util 0 with memory held.
//   - idle_notebook: kind interactive; light use (util 45) for `active` (20m), then idle for good
//     with memory held (memory_gib 6).
//   - notebook: kind interactive, healthy: a burst of `burst` (6m) every `every` (30m).
//   - startup_delay: nothing on the GPUs (no process) for `delay` (25m), then training.
//   - low_util: mean util ≈ util (14) %, irregular, memory_gib (5): fits a MIG slice.
//   - partial_gpus: the last idle_gpus (half) of the listed GPUs stay idle, the others train.
//   - overlong: training; label it overlong when it runs past the tier maximum (48 h).
//   - orphan: training until the allocation ends; the process then keeps its memory for
//     orphan_for (for good when unset), with no allocation (Process.Orphan).
//
// cpu_cores (default 6, per behaviour above) sets the job's CPU seconds rate.
//
// # Faults
//
//   - thermal_throttle (window): temperature above the throttle point, SM clock ≈ 55 %,
//     hw_slowdown, sw_thermal_slowdown and hw_thermal_slowdown bits, thermal violation rising.
//   - power_throttle (window): power at the limit, SM clock ≈ 80 %, sw_power_cap bit,
//     power violation rising.
//   - gpu_lost (window): the GPU falls off the bus: Device.Up false, no samples, no processes.
//   - xid: DCGM_FI_DEV_XID_ERRORS shows the latest code; gpuwatch_xid_errors_total{xid} counts.
//   - ecc_dbe: volatile and aggregate DBE, retired DBE pages and uncorrectable remapped rows
//     grow by count; remap and retirement pending while its window lasts.
//   - row_remap_failure: DCGM_FI_DEV_ROW_REMAP_FAILURE 1 while its window lasts (for good by
//     default), uncorrectable remapped rows grow.
//   - nvlink_errors: NVLink CRC flit (3×count), CRC data, replay (count) and recovery (1)
//     counters grow per occurrence.
//   - pcie_replay: the PCIe replay counter grows by count per occurrence.
//   - field_error (window): one field (utilization, memory, temperature, memory_temperature,
//     power_usage, energy, sm_clock, ecc_dbe_volatile, pcie_replay) fails to read like NVML's
//     ERROR_UNKNOWN: its series are left out and Snapshot.Errors names it; the rest stays.
//
// # Ground truth
//
// Scenario.Expectations (or ExpectationsAt(Source.Origin())) lists every workload with its
// expected patterns, owner, GPUs, model and time span; scenarios/corpus.yaml is the labelled
// week the analyzer's precision/recall test runs on. See scenarios/README.md.
package sim

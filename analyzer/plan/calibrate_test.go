package plan

// The calibration is what one simple pass over the window's raw samples
// costs on this machine, measured in the same run as the figure it
// calibrates (calibrate.Measure, one pass: the cold figure, as the plan
// reads the store cold too). The planner reads the same samples several
// times with dearer functions, so its cost is a multiple of that one.
//
// The bounds of the scale tests as multiples of the calibration. The plan
// reads each raw sample once per hourly figure (five range figures, the
// p95 dearer for its sort) and decodes and packs the answers. Measured on
// the shared 2-core machine with a load average of 10 to 15 from other
// work: the embedded plan's CPU time 7.96 times the calibration's; the
// Prometheus plan's CPU time (planner and server) 13.8 times and its wall
// time 14.7 times (3 min 49 s of CPU and 12 min 10 s of wall against 16.6 s
// and 49.8 s). Contention costs the plan's three queries in flight, which
// hold more memory, more than the single calibration query; on two free
// cores the figures (143 s of CPU, 80 s of wall) suggest about 9.
// The bounds are the measured ratios with a margin of 1.4 to 1.5: a plan
// that read the week twice more, or sorted it whole, exceeds them on a
// quiet machine, and a busy one does not fail a plan that reads no more.
const (
	promScaleCPU     = 20
	promScaleWall    = 20
	embeddedScaleCPU = 12
)

// promRecordedCPU bounds the CPU time (planner and Prometheus) of the plan
// from the recording rules as a share of the raw plan's in the same run.
// It reads one recorded point per holder and hour for each figure, a
// sixtieth of the raw samples, but decodes answers of the raw figures'
// shape, so the saving is Prometheus' and not the planner's. CPU, not wall
// time: the raw plan keeps both cores busy with its three queries in
// flight, while the recorded one waits on its two dearest answers, so a
// busy machine stretches their walls unalike (0.50× and 1.01× on one
// 2,000-GPU week, quiet and beside another suite). promtool writes a
// two-hour block per rule (504 for a week of the planner's six); served as
// they are, Prometheus spends more CPU finding every holder's series in
// each block than reading their points, and the recorded plan cost about
// what the raw one did. compactDays merges them by day, as a live server's
// compactor does; then the ratio measured 0.43 and 0.63 on one machine,
// the raw plan's share varying most, so the bound leaves room above that
// and still fails a plan from the rules that costs what reading the week
// does.
const promRecordedCPU = 0.9

// promRecordedScaleCPU bounds the CPU time (planner and Prometheus) of the
// 10,000-GPU plan from the recorded figures to this share of the raw
// plan's in the same run (TestPrometheusScale), where the recorded points
// sit in the raw series' own blocks as a live server compacts them. The
// recorded plan reads one point per holder, hour and figure where the raw
// one reads sixty samples of each of four metrics, and both spend the same
// on deciding the plan: 0.205 and 0.222 measured on two cores against
// Prometheus 3.16 (0.235 against 2.42), so the bound leaves half as much
// again above the highest. A plan from the rules that read the week again
// costs about what the raw one does.
const promRecordedScaleCPU = 0.35

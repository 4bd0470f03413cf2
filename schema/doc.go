// Package schema is gpuwatch's shared vocabulary: every name that more than
// one part of gpuwatch reads, defined once. It holds the metric catalogue and
// its label names, the clock-event reasons, the device field names, the waste
// patterns with their severity, default action and names for people, the
// attributes of an allocation (the labels of gpuwatch_allocation_info and the
// policy's match keys), the schedulers and the job kinds. The exporter, the
// analyzer, the policy, the dashboards, the rules, the simulator and the docs
// all read it; it imports only the standard library and client_golang, so
// the lean exporter binary can depend on it. A test in internal/repocheck
// fails when another non-test Go file spells one of its names as a string
// literal (label names that are plain words aside), or when the generated
// rules or dashboards name a metric it does not define.
package schema

// Package schema is gpuwatch's shared vocabulary: every name that more than
// one part of gpuwatch reads, defined once. It holds the metric catalogue and
// its label names, the clock-event reasons, the waste patterns with their
// severity, default action and names for people, the attributes of an
// allocation, and the job kinds. The exporter, the analyzer, the policy, the
// dashboards, the rules, the simulator and the docs all read it; it imports
// only the standard library and client_golang, so the lean exporter binary
// can depend on it. A test (internal/repocheck) fails when one of its names is
// spelled as a literal anywhere else.
package schema

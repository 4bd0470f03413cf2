// Package e2ealerts is the end-to-end test of gpuwatch's alert rules and
// dashboards: a real Prometheus scrapes `gpuwatch exporter --source=sim`
// running the throttling-xid scenario and loads rules/; a real Alertmanager
// with rules/alertmanager.example.yml posts to a webhook the test runs; every
// dashboard query, and the queries of NVIDIA's dashboard 12239, must return
// data. Run it with test/e2e-alerts/run.sh.
package e2ealerts

// Package health knows what the driver's and the board's own signals mean
// for a job: the XID catalogue (each code's meaning and whose fault it is)
// and how a throttled GPU's time lost is estimated. The detectors, the job
// view and the reports read it from here.
package health

import "fmt"

// Owner is who an XID is attributed to.
type Owner string

const (
	// OwnerHardware: the GPU, its memory or its links failed; the job is
	// not at fault and should be resubmitted elsewhere.
	OwnerHardware Owner = "hardware"
	// OwnerDriver: the driver or the GPU's firmware (GSP); not the job's
	// fault either, and counted with hardware for attribution, never for
	// draining a node.
	OwnerDriver Owner = "driver"
	// OwnerApplication: the job's own code (an illegal address, a bad
	// kernel); the GPU is healthy.
	OwnerApplication Owner = "application"
	// OwnerUnknown: a code gpuwatch does not know; never blamed on anyone.
	OwnerUnknown Owner = "unknown"
)

// XIDInfo is one XID code's entry.
type XIDInfo struct {
	Code    int
	Meaning string
	Owner   Owner
}

// xids follows NVIDIA's "XID Errors" catalogue (docs.nvidia.com/deploy/
// xid-errors, the table of XIDs and their causes, and its per-XID
// descriptions). Where the catalogue lists several possible causes, the
// owner is the one it names first for data-centre GPUs: XID 13 and 31
// ("user application fault" / illegal memory access), 43 ("user
// application fault") and 45 (cleanup of a faulting or killed process) are
// the application's; 48 (DBE), 63/64 (row remap or page retirement
// recorded / failed), 74 (NVLink), 79 (fallen off the bus), 92 (high SBE
// rate), 94/95 (contained / uncontained ECC error), 140 (unrecovered ECC)
// are the hardware's; 61/62 (micro-controller), 119/120 (GSP) the
// driver's and firmware's.
var xids = []XIDInfo{
	{13, "Graphics engine exception (illegal instruction or address in a kernel)", OwnerApplication},
	{31, "GPU memory page fault (illegal memory access by the application)", OwnerApplication},
	{43, "GPU stopped processing (application fault, e.g. a kernel that faulted)", OwnerApplication},
	{45, "Preemptive cleanup after a previous error or a killed process", OwnerApplication},
	{48, "Double-bit (uncorrectable) ECC error", OwnerHardware},
	{61, "Internal micro-controller breakpoint or warning", OwnerDriver},
	{62, "Internal micro-controller halt", OwnerDriver},
	{63, "ECC page retirement or row-remap recording event", OwnerHardware},
	{64, "ECC page retirement or row-remap recording failure", OwnerHardware},
	{69, "Graphics engine class error", OwnerApplication},
	{74, "NVLink error", OwnerHardware},
	{79, "GPU has fallen off the bus", OwnerHardware},
	{92, "High single-bit ECC error rate", OwnerHardware},
	{94, "Contained ECC error (the affected application must restart)", OwnerHardware},
	{95, "Uncontained ECC error (the GPU must be reset)", OwnerHardware},
	{119, "GSP RPC timeout", OwnerDriver},
	{120, "GSP error", OwnerDriver},
	{140, "Unrecovered ECC error", OwnerHardware},
}

// XID returns a code's entry; an unknown code has OwnerUnknown.
func XID(code int) XIDInfo {
	for _, x := range xids {
		if x.Code == code {
			return x
		}
	}
	return XIDInfo{Code: code, Meaning: fmt.Sprintf("XID %d (not in gpuwatch's catalogue)", code), Owner: OwnerUnknown}
}

// NotTheJobs reports whether an XID is the platform's fault (hardware or
// driver): a job that ended right after one ended of a GPU fault.
func (x XIDInfo) NotTheJobs() bool { return x.Owner == OwnerHardware || x.Owner == OwnerDriver }

// XIDs lists the catalogue in code order.
func XIDs() []XIDInfo { return append([]XIDInfo(nil), xids...) }

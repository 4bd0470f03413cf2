package audit

import (
	"bytes"
	"encoding/json"

	"github.com/gpuwatch/gpuwatch/internal/secret"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// MaxDetail bounds a step's detail: an actuator's error may carry a peer's
// whole answer.
const MaxDetail = 8 << 10

// redact is the one redaction of a record before it is written: a step's
// detail is often an error from someone else's system (a Hub's body, a
// scheduler's message) and its payload holds text a workload chose, so no
// credential the process knows, and no secret shape, is ever stored; names
// someone else chose are bounded.
func redact(r *Record) {
	r.Detail = redactText(r.Detail)
	r.Payload = redactJSON(r.Payload)
	for _, f := range []*string{&r.Hostname, &r.Job, &r.User, &r.Team} {
		*f = termsafe.Bound(secret.String(*f), termsafe.MaxName)
	}
}

func redactText(s string) string { return termsafe.Bound(secret.String(s), MaxDetail) }

// redactJSON redacts every string of a JSON document, value by value, so
// that the document stays valid JSON for the reconciliation that reads it
// back (a mask written into the middle of an escape would break it).
// Text that is not JSON is redacted whole.
func redactJSON(doc string) string {
	if secret.String(doc) == doc {
		return doc
	}
	d := json.NewDecoder(bytes.NewReader([]byte(doc)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return secret.String(doc)
	}
	out, err := json.Marshal(redactValue(v))
	if err != nil {
		return secret.String(doc)
	}
	return string(out)
}

func redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return secret.String(x)
	case []any:
		for i := range x {
			x[i] = redactValue(x[i])
		}
	case map[string]any:
		for k, e := range x {
			x[k] = redactValue(e)
		}
	}
	return v
}

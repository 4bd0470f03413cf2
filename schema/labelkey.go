package schema

import (
	"fmt"
	"regexp"
	"strings"
)

// Kubernetes' bounds on a label or annotation key: an optional DNS
// subdomain prefix and a name (k8s.io/apimachinery's IsQualifiedName).
const (
	maxLabelKeyPrefix = 253
	maxLabelKeyName   = 63
)

var (
	labelKeyNameRe   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelKeyPrefixRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// ValidLabelKey says why k is not a key the API server would accept on a
// pod's labels or annotations, or nil. A key nothing can carry would never
// match: an operator who names one has made a typo, not a choice.
func ValidLabelKey(k string) error {
	prefix, name, slash := strings.Cut(k, "/")
	if !slash {
		prefix, name = "", k
	}
	switch {
	case k == "":
		return fmt.Errorf("empty key")
	case len(k) > maxLabelKeyPrefix+1+maxLabelKeyName:
		return fmt.Errorf("key of %d bytes: a label key is at most %d", len(k), maxLabelKeyPrefix+1+maxLabelKeyName)
	case strings.ContainsAny(k, "*?[]\\"):
		return fmt.Errorf("key %q is a pattern: name each key exactly", k)
	case slash && (len(prefix) > maxLabelKeyPrefix || !labelKeyPrefixRe.MatchString(prefix)):
		return fmt.Errorf("key %q: the prefix before '/' must be a DNS subdomain of at most %d characters", k, maxLabelKeyPrefix)
	case len(name) > maxLabelKeyName || !labelKeyNameRe.MatchString(name):
		return fmt.Errorf("key %q: the name must be 1 to %d letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k, maxLabelKeyName)
	}
	return nil
}

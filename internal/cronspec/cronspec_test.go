package cronspec

import "testing"

func TestCheckEvery(t *testing.T) {
	for spec, ok := range map[string]bool{
		"@every 5m": true, "@every 1s": true, "*/5 * * * *": true, "@daily": true,
		"@every 0s": false, "@every -1s": false, "@every 500ms": false, "@every soon": false,
	} {
		if err := CheckEvery(spec); (err == nil) != ok {
			t.Errorf("CheckEvery(%q) = %v, want ok=%v", spec, err, ok)
		}
	}
}

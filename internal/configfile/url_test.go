package configfile

import (
	"strings"
	"testing"
)

// TestHTTPURLErrorsNameTheHostOnly: a refused URL's error names its scheme
// and host, never the path, query, fragment or user info where a webhook's
// token, a signature or a password sits.
func TestHTTPURLErrorsNameTheHostOnly(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"ftp://hooks.slack.com/services/T0/B0/xoxbSECRET", `got "ftp://hooks.slack.com"`},
		{"gopher://user:pa55SECRET@chat.example/hooks/x", `got "gopher://chat.example"`},
		{"file:///etc/SECRET", "not shown"},
		{"hooks.slack.com/services/T0/B0/SECRET", "not shown"},
		{"//chat.example/hooks/SECRET?token=SECRET", `got "//chat.example"`}, // no scheme: refused, host alone
		{"https://", "not shown"},
		{"http://[::1/SECRET", "not shown"},
		{"ws://teams.example/webhookb2/SECRET@x/IncomingWebhook/SECRET?sig=SECRET", `got "ws://teams.example"`},
		{"mattermost.example:8065/hooks/SECRET", "not shown"},
		{"javascript:alert('SECRET')", "not shown"},
		{"http:SECRET", "not shown"},
		{"https:/chat.example/SECRET", "not shown"},
		{"\x1b[2Jhttps://chat.example/SECRET", "not shown"},
		{"https://chat.example/hooks/SECRET\nX-Injected: 1", "not shown"},
		{"HTTPS://chat.example/SECRET#frag", ""}, // accepted: Go lowers the scheme
	} {
		var f fields
		_, err := Decode("f", []byte("url: "+quoteYAML(tc.url)+"\n"), &f)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.url, err)
		case tc.want == "":
		case err == nil:
			t.Errorf("%q accepted", tc.url)
		case strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%q: error %q, want %q and no SECRET", tc.url, err, tc.want)
		}
	}
}

func quoteYAML(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\x1b", `\e`).Replace(s) + `"`
}

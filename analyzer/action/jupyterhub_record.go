package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// Which of the Hub's servers runs in a pod is the Hub's to say, not the
// pod's: KubeSpawner's annotations are written into the pod spec and a
// user who can create pods can write them too. The Hub keeps each server's
// spawner state, and KubeSpawner's get_state() persists the pod it made
// (pod_name, namespace, dns_name); the Hub shows that state to a token with
// the admin:server_state scope (JupyterHub 2.0 and later). A server is
// stopped only when its state names exactly the finding's pod.

// Names the Hub keeps are at most 255 characters (its users.name and
// spawners.name columns); anything longer is no Hub name, and is bounded
// before it reaches a request, a log or the audit.
const (
	maxHubNameRunes = 255
	maxHubNameBytes = 4 * maxHubNameRunes
	// shownNameBytes is how much of a name an error shows.
	shownNameBytes = 64
)

// Bounds on reading the Hub's user list when the annotated user's record
// does not name the pod: pages of hubPageLimit users (the Hub's default
// api_page_max_limit), at most maxHubPages of them.
const (
	hubPageLimit = 200
	maxHubPages  = 100
)

// hubPaginationType asks the Hub for its paginated list form (JupyterHub
// 2.0 and later), which says where the next page starts.
const hubPaginationType = "application/jupyterhub-pagination+json"

// scopeServerState is the Hub scope that shows servers' spawner state.
const scopeServerState = "admin:server_state"

var (
	// errNoHubRecord: no server the Hub knows runs in the pod.
	errNoHubRecord = errors.New("no JupyterHub server runs in this pod")
	// errNoStateScope: the Hub withheld spawner state from the token.
	errNoStateScope = fmt.Errorf("JupyterHub shows no server state to the token: it needs the %s scope (or admin:servers)", scopeServerState)
)

// podRef is a pod as the API server names it.
type podRef struct{ namespace, name string }

func (p podRef) String() string { return p.namespace + "/" + p.name }

// hubRecord is the Hub's server whose spawner state names the pod.
type hubRecord struct {
	srv hubServer
	// stopped: the Hub no longer runs it (or is stopping it).
	stopped bool
}

// The Hub's JSON, only the fields read.
type hubUserModel struct {
	Name    string                    `json:"name"`
	Servers map[string]hubServerModel `json:"servers"`
}

type hubServerModel struct {
	Ready   bool            `json:"ready"`
	Pending *string         `json:"pending"`
	Stopped *bool           `json:"stopped"`
	State   json.RawMessage `json:"state"`
}

type hubUserPage struct {
	Items      []hubUserModel `json:"items"`
	Pagination *struct {
		Total int `json:"total"`
		Next  *struct {
			Offset int `json:"offset"`
		} `json:"next"`
	} `json:"_pagination"`
}

// kubeSpawnerState is what KubeSpawner persists of the pod it made.
type kubeSpawnerState struct {
	PodName   string `json:"pod_name"`
	Namespace string `json:"namespace"`
}

// stopped says whether the Hub no longer runs the server or is stopping
// it. JupyterHub 2.0 and later say "stopped"; before, an active server is
// ready or pending.
func (s *hubServerModel) stopped() bool {
	if s.Pending != nil && *s.Pending == "stop" {
		return true
	}
	if s.Stopped != nil {
		return *s.Stopped
	}
	return !s.Ready && s.Pending == nil
}

// names reports whether the server's spawner state names pod. State that
// is not KubeSpawner's (another spawner, null for a server never started)
// names no pod; state the Hub withheld is an error.
func (s *hubServerModel) names(pod podRef) (bool, error) {
	if s.State == nil {
		return false, errNoStateScope
	}
	var st kubeSpawnerState
	if json.Unmarshal(s.State, &st) != nil {
		return false, nil
	}
	return st.Namespace == pod.namespace && st.PodName == pod.name, nil
}

// match returns the user's server whose state names pod, if one does.
func (u *hubUserModel) match(pod podRef) (*hubRecord, error) {
	if u.Servers == nil {
		return nil, fmt.Errorf("JupyterHub lists no servers of user %s (the token needs read:servers)", shownName(u.Name))
	}
	var found *hubRecord
	for name, s := range u.Servers {
		ok, err := s.names(pod)
		if err != nil {
			return nil, fmt.Errorf("user %s: %w", shownName(u.Name), err)
		}
		if !ok {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("JupyterHub's user %s has two servers whose state names pod %s: not proven which runs there", shownName(u.Name), pod)
		}
		found = &hubRecord{srv: hubServer{user: u.Name, name: name}, stopped: s.stopped()}
	}
	if found == nil {
		return nil, nil
	}
	if err := checkHubName(found.srv.user, false); err != nil {
		return nil, fmt.Errorf("JupyterHub's record of pod %s names user %s: %w", pod, shownName(found.srv.user), err)
	}
	if err := checkHubName(found.srv.name, true); err != nil {
		return nil, fmt.Errorf("JupyterHub's record of pod %s names server %s: %w", pod, shownName(found.srv.name), err)
	}
	return found, nil
}

// record finds the Hub's server that runs in pod: first in the record of
// the user the pod's annotation names (a hint, which saves reading every
// user), then in the Hub's users that run a server. errNoHubRecord when
// none does; note says what was looked at, for the audit.
func (j *JupyterHub) record(ctx context.Context, pod podRef, hint string) (rec *hubRecord, note string, err error) {
	skip, others := "", ""
	if herr := checkHubName(hint, false); herr != nil {
		note = fmt.Sprintf("its %s annotation %s is no Hub user name (%v)", AnnotationHubUser, shownName(hint), herr)
	} else {
		u, err := j.user(ctx, hint)
		if err != nil {
			return nil, "", err
		}
		if u == nil {
			note = fmt.Sprintf("its %s annotation names %s, whom the Hub does not know", AnnotationHubUser, shownName(hint))
		} else if rec, err := u.match(pod); rec != nil || err != nil {
			return rec, "", err
		} else {
			skip, others = u.Name, "other "
			note = fmt.Sprintf("its %s annotation names %s, whose servers run elsewhere", AnnotationHubUser, shownName(hint))
		}
	}
	rec, n, err := j.scan(ctx, pod, skip)
	if err != nil || rec != nil {
		return rec, "", err
	}
	return nil, fmt.Sprintf("%s; nor do the Hub's records of the %d %susers with running servers name it", note, n, others), errNoHubRecord
}

// user reads one user's record, with stopped servers; nil when the Hub has
// no such user.
func (j *JupyterHub) user(ctx context.Context, name string) (*hubUserModel, error) {
	code, body, err := j.call(ctx, http.MethodGet, "/hub/api/users/"+url.PathEscape(name)+"?include_stopped_servers=1", "")
	if err != nil {
		return nil, err
	}
	switch code {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, nil
	default:
		return nil, fmt.Errorf("user %s: JupyterHub answered %d: %s", shownName(name), code, excerpt(body))
	}
	var u hubUserModel
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		return nil, fmt.Errorf("user %s: JupyterHub's answer is not a user: %s", shownName(name), excerpt(err.Error()))
	}
	return &u, nil
}

// scan reads the Hub's users that run a server, page by page, for the
// server whose state names pod; it returns how many users it read.
func (j *JupyterHub) scan(ctx context.Context, pod podRef, skip string) (*hubRecord, int, error) {
	seen, offset := 0, 0
	for page := 0; page < maxHubPages; page++ {
		p, err := j.page(ctx, offset)
		if err != nil {
			return nil, seen, err
		}
		for i := range p.Items {
			if p.Items[i].Name == skip {
				continue
			}
			seen++
			if rec, err := p.Items[i].match(pod); rec != nil || err != nil {
				return rec, seen, err
			}
		}
		next := p.Pagination.Next
		if next == nil {
			return nil, seen, nil
		}
		// Only the offset of the Hub's "next" is used: its URL could
		// point anywhere. An offset that does not advance would loop.
		if next.Offset <= offset {
			return nil, seen, fmt.Errorf("JupyterHub's user list pages back to offset %d from %d", next.Offset, offset)
		}
		offset = next.Offset
	}
	return nil, seen, fmt.Errorf("JupyterHub lists more than %d users with running servers: not read further, so pod %s is not proven whose", maxHubPages*hubPageLimit, pod)
}

// page reads one page of the Hub's users that run a server.
func (j *JupyterHub) page(ctx context.Context, offset int) (*hubUserPage, error) {
	q := url.Values{"state": {"active"}, "include_stopped_servers": {"1"},
		"offset": {strconv.Itoa(offset)}, "limit": {strconv.Itoa(hubPageLimit)}}
	code, body, err := j.call(ctx, http.MethodGet, "/hub/api/users?"+q.Encode(), hubPaginationType)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("list users: JupyterHub answered %d: %s", code, excerpt(body))
	}
	var p hubUserPage
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return nil, fmt.Errorf("list users: JupyterHub's answer is not a page of users (JupyterHub 2.0 or later pages it): %s", excerpt(err.Error()))
	}
	if p.Pagination == nil {
		return nil, errors.New("list users: JupyterHub's answer has no _pagination (JupyterHub 2.0 or later pages it)")
	}
	return &p, nil
}

// checkHubName refuses what cannot be a name the Hub keeps: longer than
// its columns hold, not UTF-8, with control or format characters (bidi
// overrides, zero-width marks), a slash or a path dot-segment, or spaces
// around it (JupyterHub refuses those user names). A server's name may be
// empty (the default server); a user's may not.
func checkHubName(s string, server bool) error {
	switch {
	case len(s) > maxHubNameBytes:
		return fmt.Errorf("%d bytes, over %d characters", len(s), maxHubNameRunes)
	case !utf8.ValidString(s):
		return errors.New("not UTF-8")
	case utf8.RuneCountInString(s) > maxHubNameRunes:
		return fmt.Errorf("over %d characters", maxHubNameRunes)
	case s == "" && server:
		return nil
	case s == "":
		return errors.New("empty")
	case s == "." || s == "..":
		return errors.New("a path segment")
	case strings.ContainsRune(s, '/'):
		return errors.New("holds a slash")
	case strings.TrimSpace(s) != s:
		return errors.New("spaces around it")
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("holds the control character %U", r)
		}
	}
	return nil
}

// shownName is a name as errors, logs and the audit show it: quoted, its
// control characters escaped, and cut to shownNameBytes with its length.
func shownName(s string) string {
	if len(s) <= shownNameBytes {
		return `"` + termsafe.String(s) + `"`
	}
	cut := shownNameBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf(`"%s…" (%d bytes)`, termsafe.String(s[:cut]), len(s))
}

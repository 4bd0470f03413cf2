package report

import (
	"bytes"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"strconv"
	"strings"
	"text/tabwriter"
	texttemplate "text/template"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/schema"
)

//go:embed templates
var templates embed.FS

// ImageMode says how the HTML references its charts.
type ImageMode int

const (
	// ImagesCID references inline MIME parts (cid:), for email.
	ImagesCID ImageMode = iota
	// ImagesDataURI embeds the PNGs in the HTML, for a file preview.
	ImagesDataURI
)

// Rendered is a report ready to send or save.
type Rendered struct {
	Subject string
	Text    string
	HTML    string
	Images  []Image
}

// Renderer renders reports; its templates are parsed once.
type Renderer struct {
	html, jobHTML *htmltemplate.Template
	text, jobText *texttemplate.Template
}

// NewRenderer parses the embedded templates.
func NewRenderer() (*Renderer, error) {
	funcs := map[string]any{
		"gh": gh, "pct": pct, "change": change, "label": PatternLabel,
		"money": func(v float64, r *Report) string { return money(v, r.Currency) },
		"cost":  money,
		"patterns": func(ps []schema.Pattern) string {
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = string(p)
			}
			return strings.Join(s, ", ")
		},
		"bar":  func(share float64) int { return int(min(max(share, 0), 1)*100 + 0.5) },
		"inc":  func(i int) int { return i + 1 },
		"n":    func(i int) string { return group(strconv.Itoa(i)) },
		"span": span,
		"time": func(t time.Time) string { return t.Format("2006-01-02 15:04 MST") },
		"short": func(s string, n int) string {
			if len([]rune(s)) <= n {
				return s
			}
			return string([]rune(s)[:n-1]) + "…"
		},
	}
	h, err := htmltemplate.New("report.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/report.html.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse html template: %w", err)
	}
	t, err := texttemplate.New("report.txt.tmpl").Funcs(funcs).ParseFS(templates, "templates/report.txt.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse text template: %w", err)
	}
	jh, err := htmltemplate.New("jobmail.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/jobmail.html.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse html template: %w", err)
	}
	jt, err := texttemplate.New("jobmail.txt.tmpl").Funcs(funcs).ParseFS(templates, "templates/jobmail.txt.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse text template: %w", err)
	}
	return &Renderer{html: h, text: t, jobHTML: jh, jobText: jt}, nil
}

// htmlView is what the HTML template sees.
type htmlView struct {
	*Report
	Subject string
	Images  []htmlImage
}

type htmlImage struct {
	Src           htmltemplate.URL
	Alt           string
	Width, Height int
}

// Render draws the charts and formats both parts.
func (rd *Renderer) Render(r *Report, mode ImageMode) (*Rendered, error) {
	imgs, err := Charts(r)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", Subject(r), err)
	}
	out := &Rendered{Subject: Subject(r), Images: imgs}
	v := htmlView{Report: r, Subject: out.Subject}
	for _, im := range imgs {
		src := "cid:" + im.CID
		if mode == ImagesDataURI {
			src = "data:image/png;base64," + base64.StdEncoding.EncodeToString(im.PNG)
		}
		//nolint:gosec // our own cid: or data:image/png URL, never user input
		v.Images = append(v.Images, htmlImage{Src: htmltemplate.URL(src), Alt: im.Alt, Width: im.Width, Height: im.Height})
	}
	var hb bytes.Buffer
	if err := rd.html.Execute(&hb, v); err != nil {
		return nil, fmt.Errorf("render html: %w", err)
	}
	out.HTML = hb.String()
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	if err := rd.text.Execute(tw, v); err != nil {
		return nil, fmt.Errorf("render text: %w", err)
	}
	if err := tw.Flush(); err != nil {
		return nil, fmt.Errorf("render text: %w", err)
	}
	out.Text = trimLines(tb.String())
	return out, nil
}

// jobView is what the end-of-job templates see.
type jobView struct {
	*EndedJob
	Subject string
}

// JobSubject is the subject of an end-of-job mail.
func JobSubject(e *EndedJob) string {
	if e.EndedByFault != "" {
		return mail.SanitizeHeader(fmt.Sprintf("GPU job %s on %s ended by a GPU fault, not its code: resubmit it", e.Job, e.Hostname))
	}
	return mail.SanitizeHeader(fmt.Sprintf("GPU job %s on %s ended: %s of its GPU time wasted", e.Job, e.Hostname, pct(e.WastedShare)))
}

// RenderJob formats an end-of-job mail with the reports' helpers and style.
func (rd *Renderer) RenderJob(e *EndedJob) (*Rendered, error) {
	v := jobView{EndedJob: e, Subject: JobSubject(e)}
	var hb bytes.Buffer
	if err := rd.jobHTML.Execute(&hb, v); err != nil {
		return nil, fmt.Errorf("render job mail html: %w", err)
	}
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	if err := rd.jobText.Execute(tw, v); err != nil {
		return nil, fmt.Errorf("render job mail text: %w", err)
	}
	if err := tw.Flush(); err != nil {
		return nil, fmt.Errorf("render job mail text: %w", err)
	}
	return &Rendered{Subject: v.Subject, Text: trimLines(tb.String()), HTML: hb.String()}, nil
}

// trimLines drops the trailing blanks tabwriter leaves.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// JSON is the report as indented JSON (the preview's json format).
func JSON(r *Report) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return append(b, '\n'), nil
}

// Message turns a rendered report into an email to recipients.
func (r *Rendered) Message(to []string) mail.Message {
	m := mail.Message{To: to, Subject: r.Subject, Text: r.Text, HTML: r.HTML}
	for _, im := range r.Images {
		m.Inline = append(m.Inline, mail.Inline{CID: im.CID, ContentType: "image/png", Data: im.PNG})
	}
	return m
}

// span describes a period for people: "Mon 16 Nov – Sun 22 Nov 2026".
func span(p Period) string {
	last := p.End.Add(-time.Second)
	if p.Kind == Day {
		return p.Start.Format("Monday 2 January 2006")
	}
	return p.Start.Format("Mon 2 Jan") + " – " + last.Format("Mon 2 Jan 2006")
}

// Package pagestyle is the one style sheet of gpuwatch's HTML pages: the
// analyzer's web page and the job view's standalone page look alike
// because they read the same rules.
package pagestyle

import (
	_ "embed" // page.css
	"html/template"
)

//go:embed page.css
var css string

// CSS is the style sheet, for a <style> element.
func CSS() template.CSS { return template.CSS(css) } //nolint:gosec // a constant of this package

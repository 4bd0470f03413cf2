package detect

import (
	"fmt"
	"strings"
)

func plural(n int, word string) string {
	switch n {
	case 0:
		return word + "s"
	case 1:
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

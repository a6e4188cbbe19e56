package packages

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// indexFile is one file a simple index lists for a project.
type indexFile struct {
	filename       string
	url            string // absolute, without the fragment
	sha256         string // hex, "" when the index gives none
	requiresPython string
	yanked         bool
}

// The simple index's media types (PEP 691); text/html is PEP 503's, and
// what a web server listing a directory sends.
const (
	simpleJSON = "application/vnd.pypi.simple.v1+json"
	simpleHTML = "application/vnd.pypi.simple.v1+html"
)

func isSimpleType(mt string) bool {
	return mt == simpleJSON || mt == simpleHTML || mt == "text/html" || mt == "application/json"
}

// maxIndexFiles bounds what one project page may list.
const maxIndexFiles = 100_000

// parseIndexPage reads a project page of the simple index, in either
// form, relative links resolved against base.
func parseIndexPage(project, base string, mediaType string, b []byte) ([]indexFile, error) {
	baseURL, err := url.Parse(base)
	if err != nil {
		return nil, errorf(CodeRegistry, project, "the index URL %q is not valid", base)
	}
	var files []indexFile
	if mediaType == simpleJSON || mediaType == "application/json" {
		files, err = parseIndexJSON(project, b)
	} else {
		files, err = parseIndexHTML(project, b)
	}
	if err != nil {
		return nil, err
	}
	out := files[:0]
	for _, f := range files {
		u, err := baseURL.Parse(f.url)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			continue
		}
		if h, ok := strings.CutPrefix(u.Fragment, "sha256="); ok && f.sha256 == "" {
			f.sha256 = strings.ToLower(h)
		}
		u.Fragment, u.RawFragment = "", ""
		f.url = u.String()
		if f.filename == "" {
			f.filename = pathBase(u.Path)
		}
		if f.filename == "" || strings.ContainsAny(f.filename, "/\\") {
			continue
		}
		if f.sha256 != "" {
			if _, ok := parseHexDigest("sha256", f.sha256); !ok {
				return nil, errorf(CodeRegistry, project, "the index gives %s a sha256 that is not one: %s", f.filename, quoteShort(f.sha256))
			}
		}
		out = append(out, f)
	}
	return out, nil
}

func pathBase(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	s, err := url.PathUnescape(p)
	if err != nil {
		return ""
	}
	return s
}

// parseIndexJSON reads PEP 691's JSON form.
func parseIndexJSON(project string, b []byte) ([]indexFile, error) {
	var page struct {
		Meta struct {
			APIVersion string `json:"api-version"`
		} `json:"meta"`
		Files []struct {
			Filename       string            `json:"filename"`
			URL            string            `json:"url"`
			Hashes         map[string]string `json:"hashes"`
			RequiresPython *string           `json:"requires-python"`
			Yanked         json.RawMessage   `json:"yanked"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, errorf(CodeRegistry, project, "the index's page for %s is not valid JSON: %v", project, err)
	}
	if !strings.HasPrefix(page.Meta.APIVersion, "1.") || page.Files == nil {
		return nil, errorf(CodeRegistry, project, "the index's page for %s is not a PEP 691 project page (api-version %q)", project, page.Meta.APIVersion)
	}
	if len(page.Files) > maxIndexFiles {
		return nil, errorf(CodeRegistry, project, "the index lists more than %d files for %s", maxIndexFiles, project)
	}
	files := make([]indexFile, 0, len(page.Files))
	for _, f := range page.Files {
		if !strings.HasSuffix(f.Filename, ".whl") && !strings.HasSuffix(f.Filename, ".tar.gz") && !strings.HasSuffix(f.Filename, ".zip") {
			continue
		}
		rf := indexFile{filename: f.Filename, url: f.URL, sha256: strings.ToLower(f.Hashes["sha256"])}
		if f.RequiresPython != nil {
			rf.requiresPython = *f.RequiresPython
		}
		y := strings.TrimSpace(string(f.Yanked))
		rf.yanked = y != "" && y != "false" && y != "null"
		files = append(files, rf)
	}
	return files, nil
}

// parseIndexHTML reads PEP 503's HTML form: every <a href> is a file, its
// text the file name; data-requires-python and data-yanked as PEP 503 and
// PEP 592 give them.
func parseIndexHTML(project string, b []byte) ([]indexFile, error) {
	if !looksLikeHTML(b) {
		return nil, errorf(CodeRegistry, project, "the index's page for %s is not HTML", project)
	}
	z := html.NewTokenizer(bytes.NewReader(b))
	z.SetMaxBuf(len(b) + 1)
	var files []indexFile
	var cur *indexFile
	for {
		switch z.Next() {
		case html.ErrorToken:
			return files, nil
		case html.StartTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "a" {
				continue
			}
			f := indexFile{}
			hasHref := false
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "href":
					f.url, hasHref = string(v), true
				case "data-requires-python":
					f.requiresPython = string(v)
				case "data-yanked":
					f.yanked = true
				}
			}
			if hasHref {
				cur = &f
			}
		case html.TextToken:
			if cur != nil {
				cur.filename += strings.TrimSpace(string(z.Text()))
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); string(name) == "a" && cur != nil {
				if len(files) >= maxIndexFiles {
					return nil, errorf(CodeRegistry, project, "the index lists more than %d files for %s", maxIndexFiles, project)
				}
				files = append(files, *cur)
				cur = nil
			}
		}
	}
}

// looksLikeHTML: some markup, and no NUL (a binary file served as
// text/html).
func looksLikeHTML(b []byte) bool {
	return bytes.IndexByte(b, 0) < 0 && bytes.IndexByte(b, '<') >= 0
}

package check

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"execd/internal/config"
)

// deployDir is deploy/, this module's parent.
const deployDir = ".."

// httpCloseWait is how long execd waits, after server.shutdown_grace and the
// stop of the runs still going, for their answers to leave before it closes
// the connections (serveHTTP in cmd/execd/main.go).
const httpCloseWait = 5 * time.Second

// kinds maps apiVersion/kind to a new typed object. A document of any other
// kind is refused: every kind shipped must be checked here.
var kinds = map[string]func() any{
	"v1/ConfigMap":                       func() any { return &corev1.ConfigMap{} },
	"v1/Service":                         func() any { return &corev1.Service{} },
	"apps/v1/StatefulSet":                func() any { return &appsv1.StatefulSet{} },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return &networkingv1.NetworkPolicy{} },
}

// manifest is one decoded document of deploy/k8s.
type manifest struct {
	file string
	obj  any
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into the typed struct of its kind.
// Unknown or misspelt fields and duplicate keys are errors (sigs.k8s.io/yaml
// UnmarshalStrict); so are values of the wrong type and malformed quantities.
func decodeStrict(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("apiVersion %q kind %q is not one the checks know", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// splitDocs returns the non-empty YAML documents of a file (a document of
// comments only is empty).
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range docSeparator.Split(string(b), -1) {
		var content bool
		for _, line := range strings.Split(d, "\n") {
			t := strings.TrimSpace(line)
			if t != "" && !strings.HasPrefix(t, "#") {
				content = true
				break
			}
		}
		if content {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func loadManifests(t *testing.T) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/k8s (%v)", err)
	}
	sort.Strings(files)
	var out []manifest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range splitDocs(b) {
			obj, err := decodeStrict(d)
			if err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			out = append(out, manifest{file: filepath.Base(f), obj: obj})
		}
	}
	return out
}

// only returns the single object of type T, failing unless there is exactly
// one (or, with a name, the one of that name).
func only[T any](t *testing.T, ms []manifest, name string) *T {
	t.Helper()
	var found []*T
	for _, m := range ms {
		if o, ok := m.obj.(*T); ok {
			if name == "" || objectName(o) == name {
				found = append(found, o)
			}
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("want one %T named %q in deploy/k8s, found %d", zero, name, len(found))
	}
	return found[0]
}

func objectName(o any) string {
	if m, ok := o.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return ""
}

// loadConfig parses a config.toml with execd's own parser (unknown keys and
// invalid values are errors, as at execd's start) and also returns the keys
// the file sets, as "section.key".
func loadConfig(t *testing.T, what, text string) (config.Config, map[string]bool) {
	t.Helper()
	cfg, err := config.Parse(text)
	if err != nil {
		t.Fatalf("%s: execd would refuse to start: %v", what, err)
	}
	md, err := toml.Decode(text, &map[string]any{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	set := map[string]bool{}
	for _, k := range md.Keys() {
		if len(k) == 2 {
			set[k.String()] = true
		}
	}
	return cfg, set
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stopBudget is the longest execd's stop may take after SIGTERM.
func stopBudget(c config.Config) time.Duration {
	return c.Server.ShutdownGrace.Duration + c.Sandbox.InterruptGrace.Duration + httpCloseWait
}

func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

package joinscript

import (
	"bytes"
	_ "embed"
	"text/template"
)

//go:embed join-node.sh.tmpl
var source string

var script = template.Must(template.New("join-node.sh").Delims("{{", "}}").Parse(source))

// Render returns join-node.sh for a master whose public listener is on
// port (the default of MASTER_URL; MASTER_IP comes from the command line).
func Render(port int) []byte {
	var b bytes.Buffer
	if err := script.Execute(&b, struct{ Port int }{port}); err != nil {
		panic(err) // the template is ours and takes only Port
	}
	return b.Bytes()
}

// The CDI library as the differential oracle (tests/oracle/test_oracle.py): for each case directory
// named on stdin, one line of JSON saying which spec file each qualified device name comes from, as
// the library's cache resolves the case's etc/cdi and var/run/cdi (containerd's default order).
// Built at test time with Debian's Go from Debian's packaged library sources, offline (GOPATH mode).
package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

type result struct {
	Case    string            `json:"case"`
	Devices map[string]string `json:"devices"`
	Error   string            `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		dir := in.Text()
		r := result{Case: dir, Devices: map[string]string{}}
		cache, err := cdi.NewCache(
			cdi.WithSpecDirs(filepath.Join(dir, "etc/cdi"), filepath.Join(dir, "var/run/cdi")),
			cdi.WithAutoRefresh(false))
		if err == nil {
			err = cache.Refresh()
		}
		if err != nil {
			r.Error = err.Error()
		}
		if cache != nil {
			for _, name := range cache.ListDevices() {
				if d := cache.GetDevice(name); d != nil {
					r.Devices[name] = d.GetSpec().GetPath()
				}
			}
		}
		if err := out.Encode(r); err != nil {
			os.Exit(2)
		}
	}
}

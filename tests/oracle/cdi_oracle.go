// The CDI library as the differential oracle (tests/oracle/test_oracle.py): for each case directory
// named on stdin, one line of JSON saying which spec file each qualified device name comes from, as
// the library's cache resolves the case's etc/cdi and var/run/cdi (containerd's default order).
// Built at test time with Debian's Go from Debian's packaged library sources, offline (GOPATH mode).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

type result struct {
	Case    string            `json:"case"`
	Devices map[string]string `json:"devices"`
	Error   string            `json:"error,omitempty"`
	Panic   string            `json:"panic,omitempty"` // the library crashed on the case (as containerd would)
}

func resolve(dir string) (r result) {
	r = result{Case: dir, Devices: map[string]string{}}
	defer func() {
		if p := recover(); p != nil {
			r.Panic = fmt.Sprint(p)
		}
	}()
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
	return r
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if err := out.Encode(resolve(in.Text())); err != nil {
			os.Exit(2)
		}
	}
}

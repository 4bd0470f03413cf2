module github.com/gpuwatch/gpuwatch/build/licenses

go 1.26.8

require github.com/google/licensecheck v0.3.1

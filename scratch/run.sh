cd "$(dirname "$0")"
nvcc -cubin -arch=native probe.cu -o probe.cubin && nvcc probe.cu -o probe -lcuda || exit 1
for m in 0 1 2; do echo "== mode $m"; timeout 30 ./probe $m; done

Btask long fib(int n) {
  local future a, b;
  if (n < 2) return n;
  a = spawn(fib, n - 1);
  b = spawn(fib, n - 2);
  await_all(a, b);
  return value(a) + value(b);
}

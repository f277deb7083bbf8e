import os, sys, time
print("hello", os.environ.get("RANK"), sys.argv[1:], flush=True)
time.sleep(float(os.environ.get("HELLO_SLEEP", "0")))

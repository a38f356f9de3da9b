/usr/bin/python3 -c "import mlaprefill; print(mlaprefill.backends())"

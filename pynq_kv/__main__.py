"""``python -m pynq_kv`` runs the ``pynq-kv`` command line."""

from .cli import main

if __name__ == "__main__":
    main()

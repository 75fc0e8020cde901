from torch_onnx_fx.cli import main

raise SystemExit(main())

"""What ncdoc knows about NCCL itself: the variables it reads and how it parses their values,
which devices it would pick on a node, and what bandwidth the hardware should reach."""

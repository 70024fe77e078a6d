"""Neural networks: encoders and taggers."""
